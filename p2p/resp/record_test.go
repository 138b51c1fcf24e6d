package resp

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// The keys of one MGET, and the pairs of one MSET, are recorded with a batch number of
// their own (docs/record.md: batch); a GET, a SET and an MGET of one key carry none.
func TestRecordBatches(t *testing.T) {
	type rec struct {
		op, key string
		batch   uint64
	}
	var mu sync.Mutex
	var got []rec
	var plain int
	srv := &Server{Store: newMem(1 << 10),
		RecordBatched: func(op, _ string, k Key, _ int, _ bool, _ time.Time, batch uint64, _ error) {
			mu.Lock()
			got = append(got, rec{op, string(k.Raw), batch})
			mu.Unlock()
		},
		Record: func(string, string, Key, int, bool, time.Time, error) { plain++ }}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b, d := "m@00000000@0@0a", "m@00000000@0@0b", "m@00000000@0@0d"
	in := cmd("MSET", a, "1", b, "2") + cmd("GET", a) + cmd("MGET", a, b, d) + cmd("MGET", a) + cmd("SET", d, "3") + cmd("MGET", b, d)
	exchange(t, c, in, "+OK\r\n$1\r\n1\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n*1\r\n$1\r\n1\r\n+OK\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n")
	mu.Lock()
	defer mu.Unlock()
	var ops []string
	batchOf := map[uint64]int{}
	for _, r := range got {
		ops = append(ops, r.op)
		batchOf[r.batch]++
	}
	if strings.Join(ops, " ") != "set set get get get get get set get get" || plain != 0 {
		t.Fatalf("records %v (and %d through Record)", got, plain)
	}
	mset, mget3, mget2 := got[0].batch, got[3].batch, got[8].batch
	if mset == 0 || got[1].batch != mset || mget3 == 0 || got[4].batch != mget3 || got[5].batch != mget3 || mget2 == 0 || got[9].batch != mget2 ||
		mset == mget3 || mget3 == mget2 || mset == mget2 {
		t.Errorf("MSET, MGET and MGET batches: %v", got)
	}
	if got[2].batch != 0 || got[6].batch != 0 || got[7].batch != 0 || batchOf[0] != 3 {
		t.Errorf("a GET, an MGET of one key and a SET carry a batch: %v", got)
	}
}
