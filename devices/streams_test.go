package devices

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
)

// TestWriteStreamsReported: identify and fdp-status report kernel write streams only for a
// block device, and say why there are none.
func TestWriteStreamsReported(t *testing.T) {
	f := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(f, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if j := WriteStreamsOf(f); j != nil {
		t.Errorf("regular file: %+v, want nothing", *j)
	}
	if WriteStreamsOf("/dev/null") != nil {
		t.Error("a character device reported write streams")
	}
	if got := (&WriteStreams{Max: 8, Granularity: 96 << 20}).String(); !strings.Contains(got, "8 (stream s = placement handle s-1") || !strings.Contains(got, "96.00 MiB") {
		t.Errorf("text for 8 streams: %q", got)
	}
	loop := looptest.Attach(t, f, looptest.Options{})
	j := WriteStreamsOf(loop)
	if j == nil || j.Max != 0 || j.Note == "" {
		t.Fatalf("%s: %+v, want no streams and a reason", loop, j)
	}
	t.Logf("%s: %s", loop, j)
}
