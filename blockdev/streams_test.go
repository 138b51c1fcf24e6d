package blockdev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/placement"
)

// queueDir makes a fake sysfs queue directory with the given attribute files.
func queueDir(t *testing.T, attrs map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "queue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range attrs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadWriteStreams(t *testing.T) {
	tests := []struct {
		name    string
		attrs   map[string]string
		want    WriteStreams
		wantErr error  // nil: success
		msg     string // part of the error text
	}{
		{"kernel 6.1: no attribute", map[string]string{"logical_block_size": "512\n"}, WriteStreams{}, ErrWriteStreamsKernel, "not supported, needs Linux 6.16"},
		{"FDP namespace", map[string]string{"max_write_streams": "8\n", "write_stream_granularity": "100663296\n"}, WriteStreams{Max: 8, Granularity: 96 << 20}, nil, ""},
		{"no streams", map[string]string{"max_write_streams": "0\n"}, WriteStreams{}, nil, ""},
		{"more than a byte holds", map[string]string{"max_write_streams": "256\n"}, WriteStreams{}, errors.New(""), "want 0..255"},
		{"garbage", map[string]string{"max_write_streams": "eight\n"}, WriteStreams{}, errors.New(""), `"eight"`},
		{"negative granularity", map[string]string{"max_write_streams": "2", "write_stream_granularity": "-1"}, WriteStreams{}, errors.New(""), "write_stream_granularity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readWriteStreams(queueDir(t, tt.attrs), "/dev/test")
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == nil && got != tt.want:
				t.Fatalf("got %+v, want %+v", got, tt.want)
			case tt.wantErr != nil && err == nil:
				t.Fatalf("got %+v, want an error", got)
			case tt.wantErr != nil && !strings.Contains(err.Error(), tt.msg):
				t.Fatalf("error %q lacks %q", err, tt.msg)
			}
			if tt.wantErr == ErrWriteStreamsKernel && (!errors.Is(err, ErrWriteStreamsKernel) || !errors.Is(err, ErrNotSupported)) {
				t.Fatalf("error %v is not ErrWriteStreamsKernel / ErrNotSupported", err)
			}
		})
	}
	if _, err := readWriteStreams(filepath.Join(t.TempDir(), "absent"), "/dev/x"); err == nil || errors.Is(err, ErrWriteStreamsKernel) {
		t.Errorf("a missing queue directory is not an old kernel: %v", err)
	}
}

func FuzzReadWriteStreams(f *testing.F) {
	f.Add("8\n", "100663296\n")
	f.Add("0", "")
	f.Add("999999999999999999999", "1")
	f.Fuzz(func(t *testing.T, max, gran string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "max_write_streams"), []byte(max), 0o644)
		os.WriteFile(filepath.Join(dir, "write_stream_granularity"), []byte(gran), 0o644)
		ws, err := readWriteStreams(dir, "/dev/fuzz")
		if err == nil && (ws.Max < 0 || ws.Max > 255 || ws.Granularity < 0) {
			t.Fatalf("accepted %+v", ws)
		}
	})
}

// TestUringWriteStreamSQE: a placed write on a device with write streams carries stream
// handle+1 in the SQE's byte 44 (write_stream) with bytes 45..47 zero; unplaced writes,
// reads and devices without streams leave it 0.
func TestUringWriteStreamSQE(t *testing.T) {
	r, err := uring.Setup(uring.Options{Entries: 8})
	if errors.Is(err, uring.ErrNotSupported) {
		t.Skipf("no io_uring: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 4096)
	tests := []struct {
		streams int
		op      Op
		want    byte
	}{
		{8, Op{Write: true, Buf: buf, Handle: 0}, 1},
		{8, Op{Write: true, Buf: buf, Handle: 7}, 8},
		{8, Op{Write: true, Buf: buf, Handle: placement.None}, 0},
		{8, Op{Buf: buf, Handle: 3}, 0},
		{0, Op{Write: true, Buf: buf, Handle: 3}, 0},
	}
	for i, tt := range tests {
		d := &UringDevice{fd: 3, maxChunk: uringMaxChunk, streams: WriteStreams{Max: tt.streams}}
		b := &uringBatch{d: d, ops: []Op{tt.op}, items: []int32{0}, tries: make([]uint8, 1)}
		sqe, ok := r.GetSQE()
		if !ok {
			t.Fatal("no SQE")
		}
		b.Prep(0, sqe)
		raw := sqe.Bytes()
		if raw[44] != tt.want || raw[45] != 0 || raw[46] != 0 || raw[47] != 0 {
			t.Errorf("case %d (%d streams, write %v, handle %d): bytes 44..47 = % x, want %02x 00 00 00", i, tt.streams, tt.op.Write, tt.op.Handle, raw[44:48], tt.want)
		}
	}
}

// TestUringWriteStreamsRefused: asking for write streams on a file, or a block device
// without them, fails before any I/O with an error naming why; a device whose streams are
// in use refuses a handle beyond them.
func TestUringWriteStreamsRefused(t *testing.T) {
	img := uringTestFile(t, 1<<20)
	_, err := OpenUring(img, UringOptions{WriteStreams: true})
	if !errors.Is(err, ErrNoWriteStreams) || !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "not a block device") {
		t.Fatalf("OpenUring(file, WriteStreams): %v", err)
	}
	d := openUringOrSkip(t, img, UringOptions{})
	if _, err := d.WriteStreams(); !errors.Is(err, ErrNoWriteStreams) || d.Info().Handles != 0 {
		t.Fatalf("file: WriteStreams() error %v, Handles %d", err, d.Info().Handles)
	}
	d.streams = WriteStreams{Max: 2} // as if the kernel had given two
	buf := uringAlloc(t, 4096)
	err = d.Submit([]Op{{Write: true, Off: 0, Buf: buf, Handle: 2}})
	if err == nil || !strings.Contains(err.Error(), "placement handle 2: the device has 2 write streams") {
		t.Fatalf("handle beyond the streams: %v", err)
	}

	loop := looptest.Attach(t, uringTestFile(t, 4<<20), looptest.Options{})
	_, err = OpenUring(loop, UringOptions{WriteStreams: true})
	// A loop device has no streams; a kernel before 6.16 has none at all.
	if !errors.Is(err, ErrNoWriteStreams) && !errors.Is(err, ErrWriteStreamsKernel) {
		t.Fatalf("OpenUring(%s, WriteStreams): %v", loop, err)
	}
	t.Logf("%s: %v", loop, err)
}
