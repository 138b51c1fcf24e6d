package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
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
