package blockdev

import (
	"errors"
	"os"
	"testing"
)

// A missing node under /dev is never created as a regular file (a typo of /dev/sdX would
// otherwise become a RAM-backed file that the next command takes for the device).
func TestCreateFileRefusesMissingDevNode(t *testing.T) {
	const p = "/dev/rbctl-test-no-such-device"
	if _, err := os.Lstat(p); err == nil {
		t.Skipf("%s exists", p)
	}
	if err := CreateFile(p, 1<<20); !errors.Is(err, ErrMissingDevNode) {
		t.Fatalf("CreateFile(%s) = %v; want ErrMissingDevNode", p, err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		os.Remove(p)
		t.Fatalf("%s was created", p)
	}
}
