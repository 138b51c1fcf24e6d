package devices

import (
	"errors"
	"testing"

	"github.com/rbctl/rbctl/nvme"
)

func TestReadLog(t *testing.T) {
	o := DefaultLogOptions()
	if o.Page.NSID != nvme.NSIDAll || o.Len != 512 {
		t.Fatalf("defaults %+v", o)
	}
	o.LID, o.Page.LSI, o.Len = 0x20, 1, 64 // FDP configurations of endurance group 1
	d, err := ReadLog("emu:mem?size=64M&ru=1M&ruhs=2", o)
	if err != nil || d.Page.LID != 0x20 || d.Page.LSI != 1 || len(d.Data) != 64 {
		t.Fatalf("FDP configurations log: %v, page %+v, %d bytes", err, d.Page, len(d.Data))
	}
	if _, err := ReadLog("/dev/null", o); !errors.Is(err, ErrNotNVMe) {
		t.Errorf("/dev/null: %v, want ErrNotNVMe", err)
	}
}
