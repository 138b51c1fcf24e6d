package sys

import (
	"io"
	"os"
)

// ReadFileBounded reads at most max bytes of a kernel file (procfs, sysfs): their sizes are
// not known up front, and one that grows (a /proc/locks on a busy host) must not be read
// without bound.
func ReadFileBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
