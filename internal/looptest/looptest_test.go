package looptest

import (
	"os"
	"testing"
)

func TestFileIsSparseOfTheSize(t *testing.T) {
	img := File(t, 3<<20)
	st, err := os.Stat(img)
	if err != nil || st.Size() != 3<<20 || !st.Mode().IsRegular() {
		t.Fatalf("%s: %v %+v", img, err, st)
	}
}

// On a root host with losetup the device is a block device of the file's size; elsewhere
// the test is skipped by Attach itself.
func TestNewAttachesABlockDevice(t *testing.T) {
	dev := New(t, 4<<20, Options{DirectIO: true})
	st, err := os.Stat(dev)
	if err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		t.Fatalf("%s: %v %v", dev, err, st.Mode())
	}
}
