package flagsets

import (
	"fmt"
	"os"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/units"
)

// ForceHelp is the help text of every --force: the flag has that one meaning.
func ForceHelp(what string) string {
	return "do the destructive or doubtful action the safety checks refused: " + what
}

// CreateHelp is the help text of --create (format, bench).
const CreateHelp = "create DEV as a regular file of this size if it does not exist (extend a smaller one; never shrink, never a device)"

// CheckCreate validates a --create SIZE for path before anything is touched: the size
// (0 for ""), and that path is something a file can be created at (cache.CheckCreate).
func CheckCreate(path, size string) (int64, error) {
	if size == "" {
		return 0, nil
	}
	n, err := units.ParseSize(size)
	if err != nil {
		return 0, fmt.Errorf("--create: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() { // cache.CheckCreate would show its type bits alone
		return 0, fmt.Errorf("%s: a directory, not a regular file: %w", path, cache.ErrNotRegular)
	}
	return n, cache.CheckCreate(path)
}

// CreateIfMissing is --create SIZE (format, bench): with size "" it does nothing; otherwise
// it creates path as a regular file of size bytes (mode 0600, sparse) if missing, extends a
// smaller one, and refuses to shrink a larger one, to touch a block or character device, or
// an emu: spec (cache.CreateFile). Callers run their safety gate first, so nothing is
// created on a device the gate refused.
func CreateIfMissing(path, size string) error {
	n, err := CheckCreate(path, size)
	if err != nil || n == 0 {
		return err
	}
	return cache.CreateFile(path, n)
}
