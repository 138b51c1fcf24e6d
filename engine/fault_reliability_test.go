package engine_test

// Fault matrix (docs/reliability.md): every engine operation under every injected fault,
// asserting that the engine never returns wrong bytes and never leaks or double-books a
// slot, live or after a crash-recovery, and recording what it did. Run with -v to print
// the matrix as a Markdown table.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

const (
	relSlot  = 64 << 10
	relMeta  = 1 << 20
	relSlots = 24
	relMax   = relSlot - 4096
)

func relConfig() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = relSlot
	c.MetaTotalBytes = relMeta
	c.Periodic = false
	c.VerifyOnLoad = true
	c.PayloadChecksum = true
	c.DeallocateOnDelete = true
	c.DeallocateBatch = 1
	c.StoreWorkers, c.LookupWorkers, c.LoadWorkers = 1, 1, 1
	return c
}

func relDevSize() int64 { return relMeta + relSlots*relSlot }

// relKey is key i of the reliability tests; relPayload its only payload (keys are never
// rewritten with other bytes, so any other bytes served are wrong).
func relKey(i int) engine.Key {
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], uint64(i))
	return engine.ObjectKey("rel/model", uint32(i%2), h[:], "")
}

func relPayload(i int) []byte {
	n := 1 + (i*7919)%relMax
	p := make([]byte, n)
	s := uint64(i)*0x9e3779b97f4a7c15 + 1
	for j := range p {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		p[j] = byte(s)
	}
	return p
}

func relIndex(k engine.Key) (int, bool) {
	p, ok := k.Parts()
	if !ok || len(p.ChunkHash) != 8 {
		return 0, false
	}
	// The tests write keys 0..2^31; a fuzzed checkpoint can name any chunk hash, and one that
	// decodes to a negative index once reached relPayload's make (FuzzRecoverImage's corpus
	// case negative-chunk-index). Such a key is not one of ours: foreign.
	u := binary.BigEndian.Uint64(p.ChunkHash)
	if u >= 1<<31 {
		return 0, false
	}
	i := int(u)
	return i, relKey(i).String() == k.String()
}

// audit checks an engine: every indexed key loads its exact payload or fails (never wrong
// bytes); slot ownership and usage add up; with fill, every free slot can be used (no
// leak, no double booking). It returns the indexes of the keys that loaded.
type auditResult struct {
	loaded, unloadable, wrong, foreign, dup int
	accountingErr                           string
	leaked, overbooked                      int64
	keys                                    map[int]bool
}

func audit(t *testing.T, e *engine.Engine, fill bool) auditResult {
	t.Helper()
	r := auditResult{keys: map[int]bool{}}
	owner := map[uint32]bool{}
	var keys []engine.Key
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		if owner[m.Slot] {
			r.dup++
		}
		owner[m.Slot] = true
		keys = append(keys, k)
		return true
	})
	buf := make([]byte, relMax)
	for _, k := range keys {
		i, ok := relIndex(k)
		if !ok {
			r.foreign++
			continue
		}
		clear(buf)
		got, _ := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
		if !got[0] {
			r.unloadable++
			continue
		}
		m, _ := e.Lookup(k)
		if want := relPayload(i); m.Size != len(want) || !bytes.Equal(buf[:m.Size], want) {
			r.wrong++
			continue
		}
		r.loaded++
		r.keys[i] = true
	}
	u := e.Usage()
	if u.SlotsUsed != int64(len(keys)) || u.SlotsInflight != 0 || u.SlotsUsed+u.SlotsFree+(u.SlotsTotal-u.NextSlot) != u.SlotsTotal {
		r.accountingErr = fmt.Sprintf("%+v with %d entries", u, len(keys))
	}
	if fill {
		free := u.SlotsTotal - u.SlotsUsed
		var n int64
		for i := 0; i <= relSlots+1; i++ {
			res, _ := e.PutMany([]engine.Key{relKey(900000 + i)}, [][]byte{relPayload(900000 + i)})
			if len(res.Results) != 1 || !res.Results[0] || len(res.Stored) != 1 {
				break
			}
			n++
		}
		if n < free {
			r.leaked = free - n
		} else {
			r.overbooked = n - free
		}
	}
	return r
}

func (r auditResult) bad() string {
	var s []string
	if r.wrong > 0 {
		s = append(s, fmt.Sprintf("%d wrong loads", r.wrong))
	}
	if r.foreign+r.dup > 0 {
		s = append(s, fmt.Sprintf("%d foreign, %d slots owned twice", r.foreign, r.dup))
	}
	if r.accountingErr != "" {
		s = append(s, "usage: "+r.accountingErr)
	}
	if r.leaked+r.overbooked > 0 {
		s = append(s, fmt.Sprintf("%d leaked, %d overbooked slots", r.leaked, r.overbooked))
	}
	return strings.Join(s, "; ")
}

func putKeys(t *testing.T, e *engine.Engine, idx ...int) {
	t.Helper()
	keys := make([]engine.Key, len(idx))
	pay := make([][]byte, len(idx))
	for j, i := range idx {
		keys[j], pay[j] = relKey(i), relPayload(i)
	}
	r, err := e.PutMany(keys, pay)
	if err != nil || len(r.Stored) != len(idx) {
		t.Fatalf("put %v: %+v, %v", idx, r, err)
	}
}

type matrixFault struct {
	name  string
	fault faultdev.Fault
	reads bool // meaningful on reads
}

var matrixFaults = []matrixFault{
	{"EIO", faultdev.Fault{Kind: faultdev.FaultEIO}, true},
	{"short transfer", faultdev.Fault{Kind: faultdev.FaultShort, TornUnit: 512}, true},
	// Torn writes keep the first ~10% of each write (64-byte granules): a header block
	// keeps its header, a payload is cut.
	{"torn write, error", faultdev.Fault{Kind: faultdev.FaultTorn, TornUnit: 64, Fraction: 0.1}, false},
	{"torn write, silent", faultdev.Fault{Kind: faultdev.FaultTorn, TornUnit: 64, Fraction: 0.1, Succeed: true}, false},
	{"ENOSPC", faultdev.Fault{Kind: faultdev.FaultENOSPC}, false},
	{"latency 200µs", faultdev.Fault{Kind: faultdev.FaultLatency, Delay: 200 * time.Microsecond}, true},
	{"bit flip (first byte)", faultdev.Fault{Kind: faultdev.FaultCorrupt, At: 1}, true},
	{"bit flip (byte 100)", faultdev.Fault{Kind: faultdev.FaultCorrupt, At: 101}, true},
}

var matrixOps = []string{"put", "load", "delete", "checkpoint", "recover"}

// TestFaultMatrix runs each operation under each fault on a fresh cache: keys 0..7 are
// stored and checkpointed, keys 8..9 stored after the checkpoint; then the operation runs
// with the fault armed, the fault is cleared, and the live engine and a crash-recovery of
// the device image are audited.
func TestFaultMatrix(t *testing.T) {
	cells := map[string]map[string]string{}
	for _, mf := range matrixFaults {
		cells[mf.name] = map[string]string{}
		for _, op := range matrixOps {
			t.Run(mf.name+"/"+op, func(t *testing.T) {
				cells[mf.name][op] = runMatrixCell(t, mf, op)
			})
		}
	}
	var b strings.Builder
	b.WriteString("| fault \\ op | " + strings.Join(matrixOps, " | ") + " |\n|---|" + strings.Repeat("---|", len(matrixOps)) + "\n")
	names := make([]string, 0, len(matrixFaults))
	for _, mf := range matrixFaults {
		names = append(names, mf.name)
	}
	for _, n := range names {
		row := []string{n}
		for _, op := range matrixOps {
			row = append(row, cells[n][op])
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	t.Log("fault matrix:\n" + b.String())
	if p := os.Getenv("RBCTL_FAULT_MATRIX_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runMatrixCell(t *testing.T, mf matrixFault, op string) string {
	if !mf.reads && (op == "load" || op == "recover") {
		return "n/a (reads only)"
	}
	mem := blockdev.NewMem(relDevSize(), 0)
	fd := faultdev.New(mem, 1)
	cfg := relConfig()
	e, err := engine.Format(fd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lay := e.Layout()
	putKeys(t, e, 0, 1, 2, 3, 4, 5, 6, 7)
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	putKeys(t, e, 8, 9)
	durable := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true}
	before := e.Stats()

	rule := faultdev.Rule{Name: "matrix", Fault: mf.fault}
	var outcome []string
	surfaced := false
	switch op {
	case "put":
		rule.Class, rule.OffLo = faultdev.ClassWrite, lay.DataBase
		fd.Add(rule)
		keys := []engine.Key{relKey(10), relKey(11), relKey(12), relKey(13)}
		r, err := e.PutMany(keys, [][]byte{relPayload(10), relPayload(11), relPayload(12), relPayload(13)})
		failed := 4 - len(r.Stored)
		surfaced = err != nil || failed > 0
		if surfaced {
			outcome = append(outcome, fmt.Sprintf("error surfaced (%d/4 keys failed)", failed))
		}
	case "load":
		rule.Class = faultdev.ClassRead
		fd.Add(rule)
		keys := make([]engine.Key, 10)
		bufs := make([][]byte, 10)
		for i := range keys {
			keys[i], bufs[i] = relKey(i), make([]byte, relMax)
		}
		got, err := e.LoadManyInto(keys, bufs)
		failed, wrong := 0, 0
		for i := range got {
			if !got[i] {
				failed++
			} else if p := relPayload(i); !bytes.Equal(bufs[i][:len(p)], p) {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("load under %s returned wrong bytes for %d keys", mf.name, wrong)
		}
		surfaced = err != nil || failed > 0
		if surfaced {
			outcome = append(outcome, fmt.Sprintf("miss reported (%d/10 loads failed)", failed))
		}
	case "delete":
		rule.Class = faultdev.ClassDeallocate | faultdev.ClassWrite
		fd.Add(rule)
		res := e.DeleteMany([]engine.Key{relKey(0), relKey(1), relKey(8)}, false)
		e.FlushDeallocates() // the deallocator runs in the background
		for i, ok := range res {
			if !ok {
				t.Errorf("delete %d under %s refused", i, mf.name)
			}
		}
		if d := e.Stats().DeallocateErrors - before.DeallocateErrors; d > 0 {
			surfaced = true
			outcome = append(outcome, fmt.Sprintf("deallocate error counted (%d)", d))
		}
		delete(durable, 0)
		delete(durable, 1)
	case "checkpoint":
		rule.Class = faultdev.ClassWrite | faultdev.ClassFlush
		rule.Pred = func(o faultdev.OpInfo) bool { return o.Class == faultdev.ClassFlush || o.Off < lay.DataBase }
		fd.Add(rule)
		err := e.CheckpointNow()
		surfaced = err != nil
		if surfaced {
			outcome = append(outcome, "error returned")
		} else {
			durable[8], durable[9] = true, true
		}
	case "recover":
		if err := e.CloseNoCheckpoint(); err != nil {
			t.Fatal(err)
		}
		mem = mem.Reopen()
		fd = faultdev.New(mem, 1)
		rule.Class = faultdev.ClassRead
		fd.Add(rule)
		e, err = engine.Open(fd, cfg)
		if err != nil {
			surfaced = true
			outcome = append(outcome, "open failed with error")
		} else {
			before = engine.Stats{}
			rep := e.Stats().Recovery
			if len(rep.Dropped) > 0 || rep.Kept < 8 {
				surfaced = true
				outcome = append(outcome, fmt.Sprintf("opened seq %d from container %d, %d entries dropped", rep.Seq, rep.Container, len(rep.Dropped)))
			}
		}
	}
	fired := fd.Counts().Injected
	fd.Clear()
	if fired == 0 {
		t.Errorf("%s/%s: the fault never fired", mf.name, op)
	}
	if op == "checkpoint" && surfaced {
		// The failed checkpoint must leave the state dirty: the next one (fault gone)
		// writes it, rather than finding nothing to do.
		if err := e.CheckpointNow(); err != nil {
			t.Errorf("%s/%s: retry: %v", mf.name, op, err)
		} else {
			outcome = append(outcome, "retry ok")
			durable[8], durable[9] = true, true
		}
	}

	if e != nil {
		live := audit(t, e, false)
		if bad := live.bad(); bad != "" {
			t.Errorf("%s/%s live: %s", mf.name, op, bad)
		}
		if op == "recover" {
			forgot := 0
			for i := range durable {
				if !live.keys[i] {
					forgot++
				}
			}
			if forgot > 0 {
				outcome = append(outcome, fmt.Sprintf("faulted open serves %d of 8 checkpointed keys", 8-forgot))
			}
		}
		if d := e.Stats().ChecksumErrors - before.ChecksumErrors; d > 0 {
			surfaced = true
			outcome = append(outcome, fmt.Sprintf("CRC caught %d", d))
		}
		snap := bytes.Clone(mem.Bytes())
		if live := audit(t, e, true); live.leaked+live.overbooked > 0 {
			t.Errorf("%s/%s live fill: %s", mf.name, op, live.bad())
		}
		e.CloseNoCheckpoint()
		mem = blockdev.NewMem(int64(len(snap)), 0)
		copy(mem.Bytes(), snap)
	} else {
		mem = mem.Reopen()
	}
	// Crash: recover the image as the operation left it.
	re, err := engine.Open(mem, cfg)
	if err != nil {
		t.Fatalf("%s/%s: recovery after the fault failed: %v", mf.name, op, err)
	}
	defer re.CloseNoCheckpoint()
	rec := audit(t, re, true)
	if bad := rec.bad(); bad != "" {
		t.Errorf("%s/%s after recovery: %s", mf.name, op, bad)
	}
	lost := 0
	for i := range durable {
		if !rec.keys[i] {
			lost++
		}
	}
	if !surfaced {
		outcome = append(outcome, "no error seen")
	}
	if lost == 0 {
		outcome = append(outcome, "intact")
	} else {
		outcome = append(outcome, fmt.Sprintf("%d checkpointed keys forgotten", lost))
	}
	if rep := re.Stats().Recovery; rep.Containers[0].Valid != rep.Containers[1].Valid {
		outcome = append(outcome, fmt.Sprintf("recovered from container %d", rep.Container))
	}
	if t.Failed() {
		outcome = append(outcome, "**FAILED**")
	}
	return strings.Join(outcome, "; ")
}
