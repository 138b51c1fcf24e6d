package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// A chunk of a call of several (RESP MGET, MSET) is recorded with the call's batch; one of
// a call of one chunk with none.
func TestRecordBatchOp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	rec, err := l2trace.New(l2trace.Options{Path: path}, l2trace.Header{Node: "n", Capacity: l2trace.Capacity{Slots: 8, SlotBytes: 8192}})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{opts: Config{Recorder: rec}}
	k := engine.ObjectKey("m", 1, []byte{0xab}, "s")
	now := time.Now()
	n.RecordOp(l2trace.OpGet, "resp", "c", k, 1, true, now, nil)
	n.RecordBatchOp(l2trace.OpGet, "resp", "c", k, 1, true, now, 7, nil)
	n.RecordBatchOp(l2trace.OpSet, "resp", "c", k, 1, true, now, 7, nil)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rg, err := l2trace.ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rg.Records) != 3 || rg.Records[0].Batch != 0 || rg.Records[1].Batch != 7 || rg.Records[2].Batch != 7 {
		t.Fatalf("records %+v", rg.Records)
	}
}

// A node's RESP front end records the keys of one MGET (or MSET) of several with one
// batch number, and a GET with none.
func TestRESPRecordsBatches(t *testing.T) {
	dir := t.TempDir()
	cfg := startConfig(formatFile(t, dir, "a.img"))
	cfg.RESP = &RESPConfig{Listen: "127.0.0.1:0"}
	rec := filepath.Join(dir, "rec.jsonl")
	cfg.Record = &l2trace.Options{Path: rec, MaxBytes: 1 << 20}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", n.RESPAddr())
	if err != nil {
		t.Fatal(err)
	}
	a, b := "m@00000000@0@0a0b@s", "m@00000000@0@0c0d@s"
	exchangeLine(t, c, cmd("MSET", a, "v", b, "w"), "+OK\r\n")
	exchangeLine(t, c, cmd("MGET", a, b), "*2\r\n$1\r\nv\r\n$1\r\nw\r\n")
	exchangeLine(t, c, cmd("GET", a), "$1\r\nv\r\n")
	c.Close()
	// gRPC calls of two keys and of one, numbered from the node's counter as RESP's are.
	cc := rawConn(t, n.Peer().Control)
	api := p2ppb.NewCacheClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ks := range [][]*p2ppb.ObjectKey{{wireKeyN(1), wireKeyN(2)}, {wireKeyN(3)}} {
		if _, err := api.Get(ctx, &p2ppb.GetRequest{Keys: ks}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := l2trace.ReadFiles(rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range r.Records {
		got = append(got, fmt.Sprintf("%s:%d", x.Op, x.Batch))
	}
	if s := strings.Join(got, " "); len(r.Records) != 8 || r.Records[0].Batch == 0 || r.Records[1].Batch != r.Records[0].Batch ||
		r.Records[2].Batch == 0 || r.Records[2].Batch == r.Records[0].Batch || r.Records[3].Batch != r.Records[2].Batch || r.Records[4].Batch != 0 ||
		r.Records[5].Batch == 0 || r.Records[6].Batch != r.Records[5].Batch || r.Records[5].Batch == r.Records[0].Batch || r.Records[5].Batch == r.Records[2].Batch ||
		r.Records[7].Batch != 0 {
		t.Fatalf("records (op:batch) %s, want set:A set:A get:B get:B get:0 get:C get:C get:0 with A, B, C distinct and > 0", s)
	}
}
