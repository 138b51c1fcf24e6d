package devices

import (
	"errors"
	"fmt"
	"os"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/nvme"
)

// WriteStreams is what a block device offers for placement through the kernel (Linux 6.16
// write streams: stream s = RUH status index s-1 on an NVMe FDP namespace).
type WriteStreams struct {
	Max         int    `json:"max"`
	Granularity int64  `json:"granularity_bytes"`
	Note        string `json:"note,omitempty"` // why there are none
}

// WriteStreamsOf reports the write streams of path when it is a block device, else nil.
func WriteStreamsOf(path string) *WriteStreams {
	if st, err := os.Stat(path); err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	ws, err := blockdev.BlockWriteStreams(path)
	j := &WriteStreams{Max: ws.Max, Granularity: ws.Granularity}
	switch {
	case errors.Is(err, blockdev.ErrWriteStreamsKernel):
		j.Note = "not supported, needs Linux 6.16 (this kernel ignores write_stream)"
	case err != nil:
		j.Note = err.Error()
	case ws.Max == 0:
		j.Note = "none: the device offers no write streams (no FDP, or FDP with several reclaim groups)"
	}
	return j
}

// String is the one-line form.
func (j *WriteStreams) String() string {
	if j.Max == 0 {
		return j.Note
	}
	return fmt.Sprintf("%d (stream s = placement handle s-1; granularity %s); rbctl uses them through the io_uring engine", j.Max, nvme.SizeText(j.Granularity))
}
