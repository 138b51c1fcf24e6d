package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRecordReplaysToTheNodesHits is issue 39's recording loop through the binary: a
// small LRU node served with --record, LMCache's access pattern over RESP (GET, and SET on
// a miss, native keys of three tenants, Zipf popularity), SIGTERM; `rbctl simulate
// --workload l2trace:FILE` with no size flags replays the recording into the node's capacity
// and eviction and must hit exactly where the node did (its gets and local_hits counters).
func TestServeRecordReplaysToTheNodesHits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev, rec := filepath.Join(dir, "c.img"), filepath.Join(dir, "rec.jsonl")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	addr := freeAddr(t)
	srv, c, _ := serveLogged(t, dir, dev, "--resp", addr, "--record", rec)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	rng := rand.New(rand.NewPCG(39, 4501))
	zipf := rand.NewZipf(rng, 1.1, 4, 999)
	value := strings.Repeat("v", 30000)
	hits := 0
	const gets = 2000
	for range gets {
		i := int(zipf.Uint64())
		k := fmt.Sprintf("lmc/model@%08x@0@%08x@tenant%d", 0, i, i%3)
		respCmd(conn, "GET", k)
		_, ok, err := readBulk(r)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			hits++
			continue
		}
		respCmd(conn, "SET", k, value)
		if l, err := r.ReadString('\n'); err != nil || l != "+OK\r\n" {
			t.Fatalf("SET: %q %v", l, err)
		}
	}
	conn.Close()
	st, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["gets"] != gets || st.Counters["local_hits"] != int64(hits) || st.Counters["evicted"] == 0 {
		t.Fatalf("node counters %v, client saw %d hits of %d", st.Counters, hits, gets)
	}
	stopServe(t, srv, syscall.SIGTERM)
	code, so, se := runRbctl(t, dir, 2*time.Minute, "simulate", "--workload", "l2trace:"+rec, "--placement", "none", "--json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, se)
	}
	var out struct {
		Runs []struct {
			HitRatio float64 `json:"hit_ratio"`
			Evicted  int64   `json:"evicted"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(so), &out); err != nil || len(out.Runs) != 1 {
		t.Fatalf("simulate --json: %v\n%s", err, so)
	}
	want := float64(hits) / gets
	if got := out.Runs[0].HitRatio; got < want-1e-9 || got > want+1e-9 || out.Runs[0].Evicted != st.Counters["evicted"] {
		t.Fatalf("replay: hit ratio %.6f, evicted %d; the node: %.6f (%d of %d), evicted %d", got, out.Runs[0].Evicted, want, hits, gets, st.Counters["evicted"])
	}
	b, _ := os.ReadFile(rec)
	t.Logf("node hit %d of %d gets (%.2f %%), evicted %d; the replay of its %d-line recording the same", hits, gets, 100*want, st.Counters["evicted"], strings.Count(string(b), "\n"))
}
