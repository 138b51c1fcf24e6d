package fdp

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rbctl/rbctl/nvme"
)

// hostile is a transport whose every log page, RUH status and feature data is the same
// device-chosen bytes (repeated), as a broken or malicious controller might return. It
// records the largest data buffer any command asked for and the bytes asked in total.
type hostile struct {
	page    []byte
	dw0     uint64
	largest int
	total   int
}

func (h *hostile) fill(c *nvme.Command) {
	h.largest = max(h.largest, len(c.Data))
	h.total += len(c.Data)
	off := 0
	if c.Opcode == nvme.OpGetLogPage {
		p, _ := nvme.ParseGetLogPage(c)
		off = int(p.Offset % uint64(max(len(h.page), 1)))
	}
	for i := range c.Data {
		if len(h.page) > 0 {
			c.Data[i] = h.page[(off+i)%len(h.page)]
		}
	}
}

func (h *hostile) Admin(c *nvme.Command) nvme.Completion {
	h.fill(c)
	return nvme.Completion{Result: h.dw0}
}

func (h *hostile) IO(cmds []nvme.Command, done []nvme.Completion) {
	for i := range cmds {
		h.fill(&cmds[i])
		done[i] = nvme.Completion{Result: h.dw0}
	}
}
func (h *hostile) NSID() uint32 { return 1 }
func (h *hostile) Close() error { return nil }

// Spec bounds on what one FDP read may ask for, from the count fields' widths.
const (
	maxUsageRead  = usageHdrSize + usageDescSize*0xffff         // NRUH u16
	maxRUHSRead   = RUHStatusHdrSize + RUHStatusDescSize*0xffff // NRUHSD u16
	maxEventsRead = EventsLogSize
)

// TestConfigLogSizeHostile: a configurations log header claiming 4 GiB (or more than its
// descriptor count allows) is refused from the header alone; ReadConfigs then never asks
// the device for more than the header.
func TestConfigLogSizeHostile(t *testing.T) {
	hdr := func(numfdpc uint16, size uint32) []byte {
		b := make([]byte, cfgLogHdrSize)
		binary.LittleEndian.PutUint16(b[cfgLogNOff:], numfdpc)
		binary.LittleEndian.PutUint32(b[cfgLogSizeOff:], size)
		return b
	}
	for _, tc := range []struct {
		name    string
		numfdpc uint16
		size    uint32
		ok      bool
	}{
		{"4 GiB", 0, 0xffffffff, false},
		{"4 GiB with 65536 configs", 0xffff, 0xffffffff, false},
		{"one descriptor's worth", 0, cfgLogHdrSize + 0xffff, true},
		{"more than one descriptor can be", 0, cfgLogHdrSize + 0xffff + 1, false},
		{"at the rbctl limit", 15, MaxConfigLogSize, true},
		{"past the rbctl limit", 16, MaxConfigLogSize + 4, false},
		{"below one descriptor", 0, cfgLogHdrSize + cfgDescFixed - 1, false},
	} {
		n, err := ConfigLogSize(hdr(tc.numfdpc, tc.size))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadSize)) {
			t.Errorf("%s: size %d, %v", tc.name, n, err)
		}
		h := &hostile{page: hdr(tc.numfdpc, tc.size)}
		ReadConfigs(h, 1)
		if !tc.ok && h.largest > cfgLogHdrSize {
			t.Errorf("%s: ReadConfigs asked for %d bytes after a refused header", tc.name, h.largest)
		}
	}
}

// FuzzFDPReadsBounded: whatever a device returns, no FDP read asks it for more than the
// spec's count fields allow (which is what the reads allocate), and every decode either
// fails or yields no more entries than the bytes could hold.
func FuzzFDPReadsBounded(f *testing.F) {
	g, _ := goldenConfigLog(f)
	f.Add(g, uint64(6))
	f.Add([]byte{0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, uint64(0xffffffff))
	f.Add(make([]byte, 16), uint64(0))
	f.Fuzz(func(t *testing.T, page []byte, dw0 uint64) {
		if len(page) > 1<<16 {
			return
		}
		for _, tc := range []struct {
			name  string
			limit int
			read  func(h *hostile) (int, error) // entries decoded
		}{
			{"configs", MaxConfigLogSize + 4, func(h *hostile) (int, error) {
				l, _, err := ReadConfigs(h, 1)
				if err != nil {
					return 0, err
				}
				n := 0
				for _, c := range l.Configs {
					n += 1 + len(c.RUHs)
				}
				return n, nil
			}},
			{"usage", maxUsageRead, func(h *hostile) (int, error) {
				l, _, err := ReadUsage(h, 1)
				if err != nil {
					return 0, err
				}
				return len(l.Attrs), nil
			}},
			{"RUH status", maxRUHSRead, func(h *hostile) (int, error) {
				s, _, err := ReadRUHStatus(h, 1)
				if err != nil {
					return 0, err
				}
				return len(s.Descs), nil
			}},
			{"events", maxEventsRead, func(h *hostile) (int, error) {
				l, _, err := ReadEvents(h, 1, true)
				if err != nil {
					return 0, err
				}
				return len(l.Events), nil
			}},
			{"event enables", 512, func(h *hostile) (int, error) {
				ev, err := GetEventEnables(h, 1, 0)
				return len(ev), err
			}},
		} {
			h := &hostile{page: page, dw0: dw0}
			n, err := tc.read(h)
			if h.largest > tc.limit {
				t.Fatalf("%s: asked the device for %d bytes, bound %d", tc.name, h.largest, tc.limit)
			}
			if err == nil && n > h.total {
				t.Fatalf("%s: %d entries from %d bytes", tc.name, n, h.total)
			}
		}
	})
}
