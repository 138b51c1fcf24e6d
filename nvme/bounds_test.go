package nvme

import (
	"encoding/binary"
	"errors"
	"testing"
)

// listDevice answers every Identify Active Namespace List with a page computed by page from
// the command's starting NSID, and counts the pages it served.
type listDevice struct {
	page  func(after uint32, b []byte)
	pages int
}

func (d *listDevice) Admin(c *Command) Completion {
	d.pages++
	clear(c.Data)
	d.page(c.NSID, c.Data)
	return Completion{}
}
func (d *listDevice) IO(cmds []Command, done []Completion) {}
func (d *listDevice) NSID() uint32                         { return 0 }
func (d *listDevice) Close() error                         { return nil }

// TestActiveNamespacesHostile: a device that answers every page with the same full list, or
// with NSIDs that do not ascend, is refused after one or two pages instead of being followed
// for ever; a well-formed multi-page list is read whole.
func TestActiveNamespacesHostile(t *testing.T) {
	full := func(first uint32) func(uint32, []byte) {
		return func(_ uint32, b []byte) {
			for i := 0; i < len(b)/4; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], first+uint32(i))
			}
		}
	}
	d := &listDevice{page: full(1)} // the same 1024 NSIDs whatever is asked
	ids, err := ReadActiveNamespaces(d)
	if !errors.Is(err, ErrNamespaceList) || d.pages != 2 || len(ids) != 1024 {
		t.Errorf("repeated page: %d ids after %d pages, %v", len(ids), d.pages, err)
	}
	d = &listDevice{page: func(_ uint32, b []byte) {
		binary.LittleEndian.PutUint32(b, 5)
		binary.LittleEndian.PutUint32(b[4:], 3)
	}}
	if _, err := ReadActiveNamespaces(d); !errors.Is(err, ErrNamespaceList) {
		t.Errorf("descending list: %v", err)
	}
	// Three pages, as the specification lays them out: NSIDs above the one asked for.
	d = &listDevice{page: func(after uint32, b []byte) {
		for i := 0; i < len(b)/4 && after+uint32(i)+1 <= 2500; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], after+uint32(i)+1)
		}
	}}
	if ids, err := ReadActiveNamespaces(d); err != nil || len(ids) != 2500 || ids[2499] != 2500 || d.pages != 3 {
		t.Errorf("2500 namespaces: %d ids, %d pages, %v", len(ids), d.pages, err)
	}
}

// FuzzReadActiveNamespaces: whatever pages a device returns, the list ends (at most
// MaxActiveNamespaces NSIDs, each page strictly above the last) without looping.
func FuzzReadActiveNamespaces(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0}, uint16(4))
	f.Add(make([]byte, 4096), uint16(1024))
	f.Fuzz(func(t *testing.T, seed []byte, step uint16) {
		d := &listDevice{page: func(after uint32, b []byte) {
			copy(b, seed)
			// Fill the rest of the page so that long lists and repeats are explored too.
			for i := len(seed) / 4; i < int(step)%1025 && i < len(b)/4; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], after+uint32(i)*uint32(step%7))
			}
		}}
		ids, err := ReadActiveNamespaces(d)
		if len(ids) > MaxActiveNamespaces || d.pages > MaxActiveNamespaces/1024+1 {
			t.Fatalf("%d ids over %d pages", len(ids), d.pages)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ids not ascending at %d: %v (err %v)", i, ids[i-1:i+1], err)
			}
		}
	})
}
