package resp

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// Transactions are not run: MULTI is refused, every command after it is refused unrun until
// EXEC (EXECABORT) or DISCARD (+OK), so nothing of a transaction is applied and the client is
// told (hostile battery: redis-py's default pipeline, MULTI SET GET EXEC, had its SET applied
// and raised "unknown command 'EXEC'"). EXEC and DISCARD without MULTI are Redis's errors.
func TestMultiIsRefusedAndNothingRuns(t *testing.T) {
	store := newMem(16)
	c, err := net.Dial("tcp", serve(t, &Server{Store: store}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("EXEC"), "-ERR EXEC without MULTI\r\n")
	exchange(t, c, cmd("DISCARD"), "-ERR DISCARD without MULTI\r\n")
	// Pipelined in one write, as redis-py sends a transaction.
	exchange(t, c, cmd("MULTI")+cmd("SET", key, "v")+cmd("GET", key)+cmd("NOPE")+cmd("MULTI")+cmd("EXEC"),
		"-"+errMulti+"\r\n"+"-"+errNotRun+"\r\n"+"-"+errNotRun+"\r\n"+"-"+errNotRun+"\r\n"+
			"-ERR MULTI calls can not be nested\r\n"+"-EXECABORT Transaction discarded because of previous errors.\r\n")
	if store.Len() != 0 {
		t.Fatalf("the SET of a refused transaction was applied (%d keys)", store.Len())
	}
	exchange(t, c, cmd("EXEC"), "-ERR EXEC without MULTI\r\n") // EXEC ended it
	exchange(t, c, cmd("MULTI"), "-"+errMulti+"\r\n")
	exchange(t, c, cmd("DEL", key), "-"+errNotRun+"\r\n")
	exchange(t, c, cmd("DISCARD"), "+OK\r\n")
	exchange(t, c, cmd("SET", key, "v"), "+OK\r\n") // after DISCARD commands run again
	exchange(t, c, cmd("MULTI", "x"), "-ERR wrong number of arguments for 'multi' command\r\n")
	exchange(t, c, cmd("GET", key), "$1\r\nv\r\n")
	exchange(t, c, cmd("MULTI"), "-"+errMulti+"\r\n")
	exchange(t, c, cmd("QUIT"), "+OK\r\n")
}

// redis-py's default pipeline is a transaction (MULTI ... EXEC): it raises, and its SET is
// not applied. A pipeline with transaction=False runs as before.
func TestPythonRedisTransactionRaisesAndAppliesNothing(t *testing.T) {
	py := pyRedis()
	if py == "" {
		t.Skip("python3 with the redis package not installed (apt-get install python3-redis)")
	}
	addr := serve(t, &Server{Store: newMem(1 << 20)})
	host, port, _ := strings.Cut(addr, ":")
	script := `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
k = "m/x@00000000@0@00aa@t1"
p = r.pipeline()
p.set(k, "1")
p.get(k)
try:
    p.execute()
    print("no error")
    sys.exit(1)
except redis.ResponseError as e:
    assert "MULTI is not supported" in str(e), str(e)
assert r.get(k) is None, "the SET of the failed transaction was applied"
assert r.exists(k) == 0
p = r.pipeline(transaction=False)
p.set(k, "1")
p.get(k)
assert p.execute() == [True, b"1"]
print("ok")
`
	out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python3-redis: %v\n%s", err, out)
	}
}
