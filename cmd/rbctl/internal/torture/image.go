package torture

import (
	"os"

	"github.com/rbctl/rbctl/blockdev"
)

// memCopy reads a device file into a fresh in-memory device, so the verifier can recover,
// fill and corrupt it without touching the file the next writer opens.
func memCopy(path string) (*blockdev.Mem, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := blockdev.NewMem(int64(len(b)), 0)
	copy(m.Bytes(), b)
	return m, nil
}
