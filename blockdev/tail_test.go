package blockdev

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// Writes with a Tail (Op.Tail): every backend that reports VectoredWrites puts Buf and Tail
// on the device back to back, counts both in N, and refuses what CheckOp refuses.

type tailBackend struct {
	name string
	open func(t *testing.T, size int64) Device
}

func tailBackends() []tailBackend {
	return []tailBackend{
		{"mem", func(t *testing.T, size int64) Device { return NewMem(size, 4096) }},
		{"file-buffered", func(t *testing.T, size int64) Device { return openFileT(t, size, false) }},
		{"file-direct", func(t *testing.T, size int64) Device { return openFileT(t, size, true) }},
		{"uring", func(t *testing.T, size int64) Device {
			return openUringOrSkip(t, uringTestFile(t, size), UringOptions{QueueDepth: 8, Rings: 1})
		}},
		{"uring-2-rings", func(t *testing.T, size int64) Device {
			return openUringOrSkip(t, uringTestFile(t, size), UringOptions{QueueDepth: 2, Rings: 2})
		}},
	}
}

func openFileT(t *testing.T, size int64, direct bool) Device {
	d, err := OpenFile(tempFile(t, size), FileOptions{Direct: direct, QueueDepth: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestTailWritesEveryBackend(t *testing.T) {
	for _, b := range tailBackends() {
		t.Run(b.name, func(t *testing.T) {
			d := b.open(t, 16<<20)
			if !WritesTail(d) {
				t.Fatalf("%s does not report VectoredWrites", b.name)
			}
			// A batch larger than the queue depth: header-sized heads, tails of 4 KiB .. 1 MiB.
			const n = 12
			ops := make([]Op, n)
			want := make([][]byte, n)
			for i := range ops {
				head, tail := uringAlloc(t, 4096), uringAlloc(t, 4096<<(i%9))
				uringPattern(head, 2*i)
				uringPattern(tail, 2*i+1)
				// 1 MiB + 4 KiB apart: no two ops overlap.
				ops[i] = Op{Write: true, Off: int64(i) * (1<<20 + 4096), Buf: head, Tail: tail, Handle: placement.None}
				want[i] = append(append([]byte(nil), head...), tail...)
			}
			if err := d.Submit(ops); err != nil {
				t.Fatal(err)
			}
			for i, op := range ops {
				if op.N != len(want[i]) || op.Err != nil {
					t.Fatalf("op %d: N=%d err=%v, want N=%d", i, op.N, op.Err, len(want[i]))
				}
				got := uringAlloc(t, len(want[i]))
				if err := ReadAt(d, got, op.Off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want[i]) {
					t.Fatalf("op %d: the device does not hold Buf followed by Tail", i)
				}
			}
			if u, ok := d.(*UringDevice); ok {
				if s := u.Stats(); s.VectoredOps != n {
					t.Fatalf("%+v: want %d WRITEV SQEs", s, n)
				}
			}
		})
	}
}

func TestTailRefused(t *testing.T) {
	for _, b := range tailBackends() {
		t.Run(b.name, func(t *testing.T) {
			d := b.open(t, 1<<20)
			buf := uringAlloc(t, 8192)
			cases := []struct {
				name string
				op   Op
				want error
			}{
				{"a read with a tail", Op{Off: 0, Buf: buf[:4096], Tail: buf[4096:]}, ErrNotSupported},
				{"the tail runs past the end", Op{Write: true, Off: 1<<20 - 4096, Buf: buf[:4096], Tail: buf[4096:]}, ErrOutOfRange},
			}
			if d.Info().Direct {
				cases = append(cases, struct {
					name string
					op   Op
					want error
				}{"a tail that is not whole blocks", Op{Write: true, Off: 0, Buf: buf[:4096], Tail: buf[4096 : 4096+100]}, ErrMisaligned})
			}
			for _, c := range cases {
				c.op.Handle = placement.None
				ops := []Op{c.op}
				err := d.Submit(ops)
				if !errors.Is(err, c.want) || !errors.Is(ops[0].Err, c.want) || ops[0].N != 0 {
					t.Errorf("%s: Submit %v, op err %v, N %d; want %v", c.name, err, ops[0].Err, ops[0].N, c.want)
				}
			}
		})
	}
}

// TestUringTailResubmitted: with SQEs capped at one block, a tail write goes out piece by
// piece (the rest of Buf, then the rest of Tail) and lands whole.
func TestUringTailResubmitted(t *testing.T) {
	for _, headBlocks := range []int{1, 3} {
		t.Run(fmt.Sprintf("head=%d-blocks", headBlocks), func(t *testing.T) {
			d := openUringOrSkip(t, uringTestFile(t, 1<<20), UringOptions{QueueDepth: 4, Rings: 1})
			d.maxChunk = 4096
			head, tail := uringAlloc(t, headBlocks*4096), uringAlloc(t, 60<<10)
			uringPattern(head, 7)
			uringPattern(tail, 8)
			ops := []Op{{Write: true, Off: 8192, Buf: head, Tail: tail, Handle: placement.None}}
			if err := d.Submit(ops); err != nil || ops[0].N != len(head)+len(tail) {
				t.Fatalf("Submit: %v, N=%d", err, ops[0].N)
			}
			s := d.Stats()
			got := uringAlloc(t, len(head)+len(tail))
			if err := ReadAt(d, got, 8192); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:len(head)], head) || !bytes.Equal(got[len(head):], tail) {
				t.Fatal("bytes differ after a chunked tail write")
			}
			blocks := (len(head) + len(tail)) / 4096
			if s.Resubmits != int64(blocks-1) || s.VectoredOps != 0 {
				t.Fatalf("%+v: want %d resubmits, no WRITEV (the op exceeds one SQE)", s, blocks-1)
			}
		})
	}
}
