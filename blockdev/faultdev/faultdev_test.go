package faultdev

import (
	"bytes"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// faultTestDev is a minimal in-memory blockdev.Device for these tests; it records every call.
type faultTestDev struct {
	mu       sync.Mutex
	data     []byte
	writes   int
	reads    int
	deallocs [][]blockdev.Range
	flushes  int
}

func newFaultTestDev(size int) *faultTestDev { return &faultTestDev{data: make([]byte, size)} }

func (d *faultTestDev) Info() blockdev.Info {
	return blockdev.Info{Path: "faulttest", Kind: blockdev.KindMemory, Size: int64(len(d.data)), LogicalBlock: 512, Deallocate: true}
}

func (d *faultTestDev) Submit(ops []blockdev.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first error
	for i := range ops {
		op := &ops[i]
		if err := blockdev.CheckOp(d.Info(), op); err != nil {
			op.N, op.Err = 0, err
		} else if op.Write {
			d.writes++
			op.N, op.Err = copy(d.data[op.Off:], op.Buf), nil
		} else {
			d.reads++
			op.N, op.Err = copy(op.Buf, d.data[op.Off:]), nil
		}
		if op.Err != nil && first == nil {
			first = op.Err
		}
	}
	return first
}

func (d *faultTestDev) Deallocate(r []blockdev.Range) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deallocs = append(d.deallocs, append([]blockdev.Range(nil), r...))
	for _, x := range r {
		clear(d.data[x.Off : x.Off+x.Len])
	}
	return nil
}

func (d *faultTestDev) Flush() error { d.mu.Lock(); d.flushes++; d.mu.Unlock(); return nil }
func (d *faultTestDev) Close() error { return nil }

func pattern(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestFaultyWrites(t *testing.T) {
	const blk = 512
	tests := []struct {
		name      string
		rule      Rule
		wantErr   error // nil: no error expected
		wantN     int
		wantBytes int // bytes of the 4-block write that reached the device
	}{
		{"none", Rule{Class: ClassRead, Fault: Fault{Kind: FaultEIO}}, nil, 4 * blk, 4 * blk},
		{"eio", Rule{Fault: Fault{Kind: FaultEIO}}, syscall.EIO, 0, 0},
		{"enospc", Rule{Class: ClassWrite, Fault: Fault{Kind: FaultENOSPC}}, syscall.ENOSPC, 0, 0},
		{"short-half", Rule{Fault: Fault{Kind: FaultShort}}, ErrShortTransfer, 2 * blk, 2 * blk},
		{"short-quarter", Rule{Fault: Fault{Kind: FaultShort, Fraction: 0.3}}, ErrShortTransfer, blk, blk},
		{"torn-fails", Rule{Fault: Fault{Kind: FaultTorn, Fraction: 0.75}}, syscall.EIO, 3 * blk, 3 * blk},
		{"torn-succeeds", Rule{Fault: Fault{Kind: FaultTorn, Succeed: true}}, nil, 4 * blk, 2 * blk},
		{"torn-unit", Rule{Fault: Fault{Kind: FaultTorn, TornUnit: 1024, Fraction: 0.7}}, syscall.EIO, 1024, 1024},
		{"custom-err", Rule{Fault: Fault{Kind: FaultEIO, Err: syscall.EROFS}}, syscall.EROFS, 0, 0},
		{"latency", Rule{Fault: Fault{Kind: FaultLatency, Delay: time.Millisecond}}, nil, 4 * blk, 4 * blk},
		{"range-miss", Rule{OffLo: 1 << 20, Fault: Fault{Kind: FaultEIO}}, nil, 4 * blk, 4 * blk},
		{"range-hit", Rule{OffLo: 3 * blk, OffHi: 4 * blk, Fault: Fault{Kind: FaultEIO}}, syscall.EIO, 0, 0},
		{"pred-miss", Rule{Pred: func(o OpInfo) bool { return o.Len < blk }, Fault: Fault{Kind: FaultEIO}}, nil, 4 * blk, 4 * blk},
		{"nth-2-skips-first", Rule{Nth: 2, Fault: Fault{Kind: FaultEIO}}, nil, 4 * blk, 4 * blk},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := newFaultTestDev(64 * blk)
			f := New(mem, 1, tc.rule)
			ops := []blockdev.Op{{Write: true, Off: 2 * blk, Buf: pattern(4*blk, 0xAB), Handle: placement.None}}
			err := f.Submit(ops)
			if tc.wantErr == nil {
				if err != nil || ops[0].Err != nil {
					t.Fatalf("err %v / op err %v, want none", err, ops[0].Err)
				}
			} else {
				if !errors.Is(err, tc.wantErr) || !errors.Is(ops[0].Err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				if !errors.Is(err, ErrInjected) {
					t.Fatalf("err %v does not match ErrInjected", err)
				}
			}
			if ops[0].N != tc.wantN {
				t.Fatalf("blockdev.N = %d, want %d", ops[0].N, tc.wantN)
			}
			got := bytes.Count(mem.data, []byte{0xAB})
			if got != tc.wantBytes {
				t.Fatalf("%d bytes reached the device, want %d", got, tc.wantBytes)
			}
			// The bytes that arrived are a prefix of the op.
			if tc.wantBytes > 0 && !bytes.Equal(mem.data[2*blk:2*blk+tc.wantBytes], pattern(tc.wantBytes, 0xAB)) {
				t.Fatalf("torn write is not a prefix")
			}
		})
	}
}

func TestFaultyReads(t *testing.T) {
	const blk = 512
	tests := []struct {
		name    string
		fault   Fault
		wantErr error
		wantN   int
		same    bool // buffer equals the device contents
	}{
		{"eio", Fault{Kind: FaultEIO}, syscall.EIO, 0, false},
		{"enospc-on-read-is-eio", Fault{Kind: FaultENOSPC}, syscall.EIO, 0, false},
		{"short", Fault{Kind: FaultShort}, ErrShortTransfer, 2 * blk, false},
		{"torn-read-is-short", Fault{Kind: FaultTorn}, syscall.EIO, 2 * blk, false},
		{"corrupt", Fault{Kind: FaultCorrupt}, nil, 4 * blk, false},
		{"corrupt-at-first-byte", Fault{Kind: FaultCorrupt, At: 1}, nil, 4 * blk, false},
		{"latency", Fault{Kind: FaultLatency, Delay: time.Millisecond}, nil, 4 * blk, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := newFaultTestDev(16 * blk)
			for i := range mem.data {
				mem.data[i] = byte(i * 7)
			}
			f := New(mem, 1, Rule{Class: ClassRead, Fault: tc.fault})
			buf := make([]byte, 4*blk)
			ops := []blockdev.Op{{Off: blk, Buf: buf}}
			err := f.Submit(ops)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if ops[0].N != tc.wantN {
				t.Fatalf("blockdev.N = %d, want %d", ops[0].N, tc.wantN)
			}
			if eq := bytes.Equal(buf, mem.data[blk:5*blk]); eq != tc.same {
				t.Fatalf("buffer equals device: %v, want %v", eq, tc.same)
			}
			if tc.fault.Kind == FaultCorrupt {
				diff := 0
				for i := range buf {
					if buf[i] != mem.data[blk+i] {
						diff++
					}
				}
				if diff != 1 {
					t.Fatalf("corrupt read differs in %d bytes, want 1", diff)
				}
				if tc.fault.At == 1 && buf[0] == mem.data[blk] {
					t.Fatal("At: 1 did not flip the first byte")
				}
			}
			if tc.fault.Kind != FaultCorrupt && tc.wantN > 0 && !bytes.Equal(buf[:tc.wantN], mem.data[blk:blk+tc.wantN]) {
				t.Fatalf("transferred prefix is wrong")
			}
		})
	}
}

func TestFaultyCorruptWriteKeepsCallerBuffer(t *testing.T) {
	mem := newFaultTestDev(4096)
	f := New(mem, 1, Rule{Class: ClassWrite, Fault: Fault{Kind: FaultCorrupt}})
	buf := pattern(1024, 0x11)
	if err := blockdev.WriteAt(f, buf, 0, placement.None); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(1024, 0x11)) {
		t.Fatal("caller's buffer was modified")
	}
	if bytes.Equal(mem.data[:1024], buf) {
		t.Fatal("device holds the uncorrupted bytes")
	}
}

func TestFaultyOrdinals(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		want []bool // which of 6 writes fail
	}{
		{"nth3", Rule{Nth: 3, Fault: Fault{Kind: FaultEIO}}, []bool{false, false, true, false, false, false}},
		{"after4", Rule{After: 4, Fault: Fault{Kind: FaultEIO}}, []bool{false, false, false, false, true, true}},
		{"after1-times2", Rule{After: 1, Times: 2, Fault: Fault{Kind: FaultEIO}}, []bool{false, true, true, false, false, false}},
		{"every", Rule{Fault: Fault{Kind: FaultEIO}}, []bool{true, true, true, true, true, true}},
		{"reads-only", Rule{Class: ClassRead, Fault: Fault{Kind: FaultEIO}}, []bool{false, false, false, false, false, false}},
		{"pred-handle-3", Rule{Pred: func(o OpInfo) bool { return o.Handle == 3 }, Fault: Fault{Kind: FaultEIO}},
			[]bool{false, false, false, true, false, false}},
		{"pred-odd-offsets", Rule{Pred: func(o OpInfo) bool { return o.Off/512%2 == 1 }, Fault: Fault{Kind: FaultEIO}},
			[]bool{false, true, false, true, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(newFaultTestDev(8192), 1, tc.rule)
			for i, want := range tc.want {
				err := blockdev.WriteAt(f, pattern(512, 1), int64(i)*512, placement.Handle(i))
				if (err != nil) != want {
					t.Fatalf("write %d: err %v, want failure %v", i, err, want)
				}
			}
		})
	}
}

func TestFaultyFirstRuleWinsAndCounts(t *testing.T) {
	f := New(newFaultTestDev(8192), 1,
		Rule{Name: "a", Nth: 2, Fault: Fault{Kind: FaultENOSPC}},
		Rule{Name: "b", Fault: Fault{Kind: FaultEIO}, Class: ClassWrite},
	)
	err1 := blockdev.WriteAt(f, pattern(512, 1), 0, placement.None)
	err2 := blockdev.WriteAt(f, pattern(512, 1), 0, placement.None)
	if !errors.Is(err1, syscall.EIO) || !errors.Is(err2, syscall.ENOSPC) {
		t.Fatalf("errors %v, %v: want EIO (rule b) then ENOSPC (rule a)", err1, err2)
	}
	c := f.Counts()
	if c.Ops != 2 || c.Injected != 2 || c.ByRule["a"] != 1 || c.ByRule["b"] != 1 || c.ByKind[FaultEIO] != 1 {
		t.Fatalf("counts %+v", c)
	}
	f.Clear()
	if err := blockdev.WriteAt(f, pattern(512, 1), 0, placement.None); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

func TestFaultyRandomIsSeeded(t *testing.T) {
	run := func(seed uint64) []bool {
		f := New(newFaultTestDev(4096), seed, Rule{Prob: 0.3, Fault: Fault{Kind: FaultEIO}})
		out := make([]bool, 400)
		for i := range out {
			out[i] = blockdev.WriteAt(f, pattern(512, 1), 0, placement.None) != nil
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	fails := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed diverged at op %d", i)
		}
		if a[i] {
			fails++
		}
	}
	if fails < 80 || fails > 160 {
		t.Fatalf("%d of 400 ops failed at p=0.3", fails)
	}
	differs := false
	for i := range a {
		differs = differs || a[i] != c[i]
	}
	if !differs {
		t.Fatal("different seeds gave the same fault sequence")
	}
}

func TestFaultyBatchPartial(t *testing.T) {
	// In a batch only the selected op fails; the others reach the device.
	mem := newFaultTestDev(8192)
	f := New(mem, 1, Rule{OffLo: 1024, OffHi: 1536, Fault: Fault{Kind: FaultEIO}})
	ops := []blockdev.Op{
		{Write: true, Off: 0, Buf: pattern(512, 1)},
		{Write: true, Off: 1024, Buf: pattern(512, 2)},
		{Write: true, Off: 2048, Buf: pattern(512, 3)},
	}
	err := f.Submit(ops)
	if !errors.Is(err, syscall.EIO) || ops[0].Err != nil || ops[2].Err != nil || ops[1].Err == nil {
		t.Fatalf("err %v, op errs %v %v %v", err, ops[0].Err, ops[1].Err, ops[2].Err)
	}
	if mem.data[0] != 1 || mem.data[1024] != 0 || mem.data[2048] != 3 {
		t.Fatal("wrong bytes on device")
	}
	if mem.writes != 2 {
		t.Fatalf("%d writes reached the device, want 2", mem.writes)
	}
}

var errLostFlush = errors.New("flush reported but dropped")

func TestFaultyDeallocateAndFlush(t *testing.T) {
	rs := []blockdev.Range{{Off: 0, Len: 512}, {Off: 1024, Len: 512}, {Off: 2048, Len: 512}, {Off: 4096, Len: 512}}
	tests := []struct {
		name     string
		rule     Rule
		wantErr  error
		reached  int // ranges that reached the device
		flushErr error
	}{
		{"eio", Rule{Class: ClassDeallocate, Fault: Fault{Kind: FaultEIO}}, syscall.EIO, 0, nil},
		{"enospc", Rule{Class: ClassDeallocate, Fault: Fault{Kind: FaultENOSPC}}, syscall.ENOSPC, 0, nil},
		{"short", Rule{Class: ClassDeallocate, Fault: Fault{Kind: FaultShort}}, ErrShortTransfer, 2, nil},
		{"torn-silent", Rule{Class: ClassDeallocate, Fault: Fault{Kind: FaultTorn, Succeed: true}}, nil, 2, nil},
		{"range-miss", Rule{Class: ClassDeallocate, OffLo: 8192, Fault: Fault{Kind: FaultEIO}}, nil, 4, nil},
		{"flush-eio", Rule{Class: ClassFlush, Fault: Fault{Kind: FaultEIO}}, nil, 4, syscall.EIO},
		{"flush-lost-silently", Rule{Class: ClassFlush, Fault: Fault{Kind: FaultTorn, Succeed: true}}, nil, 4, errLostFlush},
		{"flush-latency", Rule{Class: ClassFlush, Fault: Fault{Kind: FaultLatency, Delay: time.Millisecond}}, nil, 4, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := newFaultTestDev(8192)
			f := New(mem, 1, tc.rule)
			err := f.Deallocate(rs)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("deallocate err %v, want %v", err, tc.wantErr)
			}
			n := 0
			for _, d := range mem.deallocs {
				n += len(d)
			}
			if n != tc.reached {
				t.Fatalf("%d ranges reached the device, want %d", n, tc.reached)
			}
			ferr := f.Flush()
			if tc.flushErr == errLostFlush {
				if ferr != nil || mem.flushes != 0 {
					t.Fatalf("lost flush: err %v, %d flushes reached the device", ferr, mem.flushes)
				}
				return
			}
			if tc.flushErr == nil && ferr != nil || tc.flushErr != nil && !errors.Is(ferr, tc.flushErr) {
				t.Fatalf("flush err %v, want %v", ferr, tc.flushErr)
			}
			if (mem.flushes == 1) != (tc.flushErr == nil) {
				t.Fatalf("flush reached the device %d times", mem.flushes)
			}
		})
	}
}

func TestFaultyComposesAndThen(t *testing.T) {
	// Outer wrapper: torn silent writes; inner wrapper: EIO on the 2nd write it sees.
	mem := newFaultTestDev(8192)
	inner := New(mem, 1, Rule{Name: "inner", Nth: 2, Fault: Fault{Kind: FaultEIO}})
	var thenCalls []OpInfo
	outer := New(inner, 2, Rule{Name: "outer", Nth: 1, Fault: Fault{Kind: FaultTorn, Succeed: true},
		Then: func(o OpInfo) { thenCalls = append(thenCalls, o) }})
	if err := blockdev.WriteAt(outer, pattern(1024, 9), 0, placement.None); err != nil {
		t.Fatalf("first write (torn silently): %v", err)
	}
	if mem.data[0] != 9 || mem.data[512] != 0 {
		t.Fatal("first write not torn at 512 bytes")
	}
	if err := blockdev.WriteAt(outer, pattern(512, 7), 2048, placement.None); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second write: %v, want the inner wrapper's EIO", err)
	}
	if len(thenCalls) != 1 || thenCalls[0].Class != ClassWrite || thenCalls[0].Len != 1024 || thenCalls[0].Seq != 1 {
		t.Fatalf("Then calls %+v", thenCalls)
	}
	if outer.Info() != mem.Info() {
		t.Fatal("blockdev.Info not passed through")
	}
}

func TestFaultyConcurrent(t *testing.T) {
	mem := newFaultTestDev(1 << 16)
	f := New(mem, 3, Rule{Prob: 0.1, Fault: Fault{Kind: FaultEIO}}, Rule{Class: ClassRead, Prob: 0.1, Fault: Fault{Kind: FaultShort}})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1024)
			for i := 0; i < 200; i++ {
				_ = blockdev.WriteAt(f, buf, int64(g)*4096, placement.None)
				_ = blockdev.ReadAt(f, buf, int64(g)*4096)
			}
		}()
	}
	wg.Wait()
	c := f.Counts()
	if c.Ops != 8*200*2 || c.Injected == 0 || c.Injected == c.Ops {
		t.Fatalf("counts %+v", c)
	}
}

func TestFaultyTornOnDirectDeviceKeepsBlocks(t *testing.T) {
	mem := blockdev.NewMem(1<<16, 4096) // blockdev.Direct, 4 KiB logical blocks
	f := New(mem, 1, Rule{Fault: Fault{Kind: FaultTorn, TornUnit: 64, Fraction: 0.6}})
	buf := pattern(4*4096, 0xCD)
	ops := []blockdev.Op{{Write: true, Off: 0, Buf: buf}}
	if err := f.Submit(ops); !errors.Is(err, syscall.EIO) {
		t.Fatalf("err %v, want the injected EIO (not a misaligned write)", err)
	}
	if ops[0].N != 8192 || bytes.Count(mem.Bytes(), []byte{0xCD}) != 8192 {
		t.Fatalf("blockdev.N %d, %d bytes written; want 2 whole blocks", ops[0].N, bytes.Count(mem.Bytes(), []byte{0xCD}))
	}
}

// TestFaultyTailWrites: a write with a Tail passes through whole, and a fault treats Buf
// and Tail as one transfer: a torn or short fault lets a prefix through that may end inside
// either part, a corrupt fault flips one byte of either part (never the caller's).
func TestFaultyTailWrites(t *testing.T) {
	const blk = 512
	head, tail := pattern(2*blk, 0xA1), pattern(6*blk, 0xB2)
	whole := append(append([]byte(nil), head...), tail...)
	tests := []struct {
		name    string
		rule    *Rule
		wantN   int
		arrived int // bytes of whole that reached the device, as a prefix
	}{
		{"pass-through", nil, 8 * blk, 8 * blk},
		{"torn-inside-tail", &Rule{Fault: Fault{Kind: FaultTorn, Fraction: 0.75}}, 6 * blk, 6 * blk},
		{"torn-inside-head", &Rule{Fault: Fault{Kind: FaultTorn, Fraction: 0.15}}, blk, blk},
		{"short-at-the-seam", &Rule{Fault: Fault{Kind: FaultShort, Fraction: 0.25}}, 2 * blk, 2 * blk},
		{"torn-succeeds", &Rule{Fault: Fault{Kind: FaultTorn, Succeed: true}}, 8 * blk, 4 * blk},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := blockdev.NewMem(64*blk, blk)
			f := New(mem, 1)
			if tc.rule != nil {
				f.Add(*tc.rule)
			}
			if !f.VectoredWrites() {
				t.Fatal("a wrapper of a vectored device does not report VectoredWrites")
			}
			ops := []blockdev.Op{{Write: true, Off: 4 * blk, Buf: head, Tail: tail, Handle: placement.None}}
			f.Submit(ops)
			if ops[0].N != tc.wantN {
				t.Fatalf("N = %d, want %d (err %v)", ops[0].N, tc.wantN, ops[0].Err)
			}
			got := mem.Bytes()[4*blk : 12*blk]
			if !bytes.Equal(got[:tc.arrived], whole[:tc.arrived]) || bytes.ContainsAny(got[tc.arrived:], "\xa1\xb2") {
				t.Fatalf("the device holds not exactly the first %d bytes of Buf+Tail", tc.arrived)
			}
		})
	}
	for _, at := range []int{blk, 5 * blk} { // a byte of the head, a byte of the tail
		mem := blockdev.NewMem(64*blk, blk)
		f := New(mem, 1, Rule{Class: ClassWrite, Fault: Fault{Kind: FaultCorrupt, At: at}})
		ops := []blockdev.Op{{Write: true, Off: 0, Buf: head, Tail: tail, Handle: placement.None}}
		if err := f.Submit(ops); err != nil || ops[0].N != len(whole) {
			t.Fatalf("corrupt at %d: %v, N %d", at, err, ops[0].N)
		}
		want := append([]byte(nil), whole...)
		want[at-1] ^= 0x5a
		if !bytes.Equal(mem.Bytes()[:len(whole)], want) || !bytes.Equal(head, pattern(2*blk, 0xA1)) || !bytes.Equal(tail, pattern(6*blk, 0xB2)) {
			t.Fatalf("corrupt at %d: not exactly one byte flipped on the device, or the caller's buffers changed", at)
		}
	}
	if New(newFaultTestDev(4096), 1).VectoredWrites() {
		t.Fatal("a wrapper of a device without vectored writes reports VectoredWrites")
	}
}
