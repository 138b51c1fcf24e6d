package uring

import (
	"testing"

	"github.com/rbctl/rbctl/internal/sys"
)

func TestBufferTable(t *testing.T) {
	mem, err := sys.Alloc(3 << 12)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Free(mem)
	// Registered out of address order: index follows the list, lookup the addresses.
	a, b := mem[8192:12288], mem[:4096]
	tab, err := NewBufferTable([][]byte{a, b})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    []byte
		idx  uint16
		want bool
	}{
		{a, 0, true}, {b, 1, true}, {b[100:200], 1, true}, {a[4095:], 0, true},
		{mem[4096:8192], 0, false}, // the gap between them
		{mem[4000:4200], 0, false}, // runs off b's end
		{b[:0], 0, false},
		{make([]byte, 16), 0, false}, // Go heap memory
	} {
		idx, ok := tab.Lookup(c.p)
		if ok != c.want || ok && idx != c.idx {
			t.Errorf("Lookup(len %d) = %d %v, want %d %v", len(c.p), idx, ok, c.idx, c.want)
		}
		if ok && !tab.Holds(int(idx), c.p) {
			t.Errorf("Holds(%d) false for a slice Lookup found there", idx)
		}
	}
	if tab.Holds(0, b) || tab.Holds(2, a) || tab.Holds(-1, a) || tab.Len() != 2 {
		t.Error("Holds accepted a slice outside the named buffer, or a bad index")
	}
	var none *BufferTable
	if _, ok := none.Lookup(a); ok || none.Holds(0, a) || none.Len() != 0 {
		t.Error("nil table holds something")
	}
	if _, err := NewBufferTable(nil); err == nil {
		t.Error("empty table accepted")
	}
	if _, err := NewBufferTable([][]byte{a, {}}); err == nil {
		t.Error("empty buffer accepted")
	}
	if _, err := NewBufferTable(make([][]byte, MaxBuffers+1)); err == nil {
		t.Error("too many buffers accepted")
	}
}
