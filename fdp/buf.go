package fdp

import "github.com/rbctl/rbctl/blockdev"

// Data buffers handed to a transport must not move while the command is in flight; take
// them from blockdev.Alloc (page aligned, outside the Go heap) as package nvme does.
func alloc(n int) ([]byte, error) { return blockdev.Alloc(n) }

func free(b []byte) { _ = blockdev.Free(b) }
