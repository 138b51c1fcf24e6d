package resp

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

func engineOn(t *testing.T, img string, format bool) *engine.Engine {
	t.Helper()
	dev, err := blockdev.OpenFile(img, blockdev.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 64<<10, 1<<20, false
	open := engine.Open
	if format {
		open = engine.Format
	}
	e, err := open(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A chunk SET through RESP under LMCache's native key is the raw-block entry of the same
// ObjectKey: after a restart the engine reads it under my%2Fmodel@0x00000001@0@deadbeef@tenant
// (what `rbctl get --key` and LMCache's raw-block adapter name), byte for byte. Values
// larger than a slot's payload are refused and store nothing; other keys are refused.
func TestEngineStoreSharesEntriesWithTheRawBlockCodec(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	e := engineOn(t, img, true)
	c, err := net.Dial("tcp", serve(t, &Server{Store: EngineStore{e}}))
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte(i * 7)
	}
	exchange(t, c, cmd("SET", key, string(val)), "+OK\r\n")
	exchange(t, c, cmd("GET", key), "$1000\r\n"+string(val)+"\r\n")
	exchange(t, c, cmd("EXISTS", key), ":1\r\n")
	exchange(t, c, cmd("SET", "my/model@00000001@0@00ff", strings.Repeat("x", 64<<10-4096+1)), "+OK\r\n") // dropped: too large
	exchange(t, c, cmd("EXISTS", "my/model@00000001@0@00ff"), ":0\r\n")
	// Any other key lives in the generic namespace: its own entry, listed by its bytes.
	exchange(t, c, cmd("SET", "key:1", "v"), "+OK\r\n")
	exchange(t, c, cmd("GET", "key:1"), "$1\r\nv\r\n")
	exchange(t, c, cmd("SET", strings.Repeat("k", MaxGenericKey+1), "v"), "+OK\r\n") // dropped: key refused
	exchange(t, c, cmd("GET", strings.Repeat("k", MaxGenericKey+1)), "$-1\r\n")
	exchange(t, c, cmd("SCAN", "0"), "*2\r\n$1\r\n0\r\n*2\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n$5\r\nkey:1\r\n")
	exchange(t, c, cmd("DBSIZE"), ":2\r\n")
	c.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = engineOn(t, img, false)
	defer e.Close()
	k, err := engine.ParseKey("my%2Fmodel@0x00000001@0@deadbeef@tenant", engine.NamespaceObject)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(val))
	ok, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
	if err != nil || !ok[0] || !bytes.Equal(buf, val) {
		t.Fatalf("raw-block key after restart: %v %v", ok, err)
	}
}

// SCAN lists every object key the cache holds (issue 35: DBSIZE 3, SCAN 1): a native key
// under its native spelling, a generic key under its bytes, and a key another client wrote
// in the raw-block codec's shape (rbctl put, gRPC) under that spelling, which GET, EXISTS
// and DEL then take.
func TestScanListsObjectShapeKeys(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil || os.Truncate(img, 16<<20) != nil {
		t.Fatal(err)
	}
	e := engineOn(t, img, true)
	defer e.Close()
	raw := engine.ObjectKey("my/model", 1, []byte{0xbe, 0xef}, "tenant") // my%2Fmodel@0x00000001@beef@tenant
	grp := engine.ObjectGroupKey("m", 2, 5, []byte{0xca, 0xfe}, "")      // m@0x00000002@5@cafe
	// A generic-namespace entry whose bytes spell the native key stored below (what SET of
	// rbctl.resp.generic@0x00000000@HEX-of-that-name stores): listed under its object-key
	// spelling, not a second time under the native name.
	alias := engine.ObjectKey(GenericModel, 0, []byte(key), "")
	if res, err := e.PutMany([]engine.Key{raw, grp, alias}, [][]byte{[]byte("raw"), []byte("grp"), []byte("alias")}); err != nil || !res.Results[0] || !res.Results[1] || !res.Results[2] {
		t.Fatal(res, err)
	}
	c, err := net.Dial("tcp", serve(t, &Server{Store: EngineStore{e}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("SET", key, "native"), "+OK\r\n")
	exchange(t, c, cmd("SET", "plain", "generic"), "+OK\r\n")
	exchange(t, c, cmd("DBSIZE"), ":5\r\n")
	c.Write([]byte(cmd("SCAN", "0", "COUNT", "100")))
	br := bufio.NewReader(c)
	line := func() string { l, _ := br.ReadString('\n'); return strings.TrimSuffix(l, "\r\n") }
	if h := line() + line() + line(); h != "*2$10" {
		t.Fatalf("SCAN reply head %q", h)
	}
	var reply []string
	cnt, _ := strconv.Atoi(strings.TrimPrefix(line(), "*"))
	for range cnt {
		line()
		reply = append(reply, line())
	}
	grpNative, _ := grp.Native() // a canonical group-shape key is listed natively: m@00000002@5@cafe
	want := map[string]string{raw.String(): "raw", grpNative: "grp", key: "native", "plain": "generic", alias.String(): "alias"}
	if len(reply) != len(want) {
		t.Fatalf("SCAN listed %q, want the 5 keys %v", reply, want)
	}
	seen := map[string]bool{}
	for _, k := range reply {
		v, ok := want[k]
		if !ok || seen[k] {
			t.Fatalf("SCAN listed %q (listed before: %v); all: %q", k, seen[k], reply)
		}
		seen[k] = true
		exchange(t, c, cmd("GET", k), "$"+strconv.Itoa(len(v))+"\r\n"+v+"\r\n")
	}
	exchange(t, c, cmd("DEL", raw.String()), ":1\r\n")
	exchange(t, c, cmd("EXISTS", raw.String(), grp.String()), ":1\r\n")
}
