package resp

import (
	"os/exec"
	"strings"
	"testing"
)

// pyRedis is a python3 that has the redis package (Debian python3-redis), or "".
func pyRedis() string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	return ""
}

// python3-redis, a client no one here wrote: pipelines of binary values (every byte value,
// CR/LF/NUL inside) written and read back byte for byte, EXISTS/DEL counts, AUTH.
func TestPythonRedisPipelines(t *testing.T) {
	py := pyRedis()
	if py == "" {
		t.Skip("python3 with the redis package not installed (apt-get install python3-redis)")
	}
	addr := serve(t, &Server{Store: newMem(1 << 20), Auth: func(u, p string) bool { return p == "pw" }})
	host, port, _ := strings.Cut(addr, ":")
	script := `
import os, sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), password="pw")
assert r.ping()
keys = ["m/x@%08x@0@%04x@t:%d" % (i, i, i % 3) for i in range(64)]
vals = [bytes((i * 7 + j) % 256 for j in range(4096 + i)) + b"\r\n\x00$*" for i in range(64)]
p = r.pipeline(transaction=False)
for k, v in zip(keys, vals):
    p.set(k, v)
assert p.execute() == [True] * 64
p = r.pipeline(transaction=False)
for k in keys:
    p.get(k)
got = p.execute()
assert got == vals, "binary values differ"
assert r.exists(*keys) == 64
assert r.mget(keys[:3] + ["m/x@00000000@0@ffff"]) == vals[:3] + [None]
assert r.delete(*keys[:10]) == 10
assert r.dbsize() == 54
assert r.set("plain", b"v")  # a key the store does not take: +OK, dropped
assert r.get("plain") is None
print("ok")
`
	out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python3-redis: %v\n%s", err, out)
	}
}
