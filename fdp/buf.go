package fdp

import "github.com/rbctl/rbctl/internal/sys"

// Data buffers handed to a transport must not move while the command is in flight: page
// aligned memory outside the Go heap, as package nvme uses.
func alloc(n int) ([]byte, error) { return sys.Alloc(n) }

func free(b []byte) { _ = sys.Free(b) }
