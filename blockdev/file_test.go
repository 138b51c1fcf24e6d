package blockdev

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/placement"
)

func tempFile(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dev.img")
	if err := CreateFile(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileRoundTrip(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "direct"}[direct], func(t *testing.T) {
			p := tempFile(t, 1<<20)
			d, err := OpenFile(p, FileOptions{Direct: direct, QueueDepth: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Info().Size != 1<<20 || d.Info().Kind != KindFile {
				t.Fatalf("info = %+v", d.Info())
			}
			bufs := make([][]byte, 8)
			ops := make([]Op, 8)
			for i := range bufs {
				b, _ := Alloc(8192)
				defer Free(b)
				for j := range b {
					b[j] = byte(i*7 + j)
				}
				bufs[i] = b
				ops[i] = Op{Write: true, Off: int64(i) * 8192, Buf: b, Handle: placement.None}
			}
			if err := d.Submit(ops); err != nil {
				t.Fatal(err)
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := range bufs {
				r, _ := Alloc(8192)
				if err := ReadAt(d, r, int64(i)*8192); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(r, bufs[i]) {
					t.Fatalf("block %d differs", i)
				}
				Free(r)
			}
		})
	}
}

func TestFileDirectRejectsMisalignedBuffer(t *testing.T) {
	d, err := OpenFile(tempFile(t, 1<<20), FileOptions{Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, _ := Alloc(8192)
	defer Free(b)
	for _, c := range []struct {
		name string
		op   Op
	}{
		{"unaligned offset", Op{Off: 100, Buf: b[:4096]}},
		{"unaligned length", Op{Off: 0, Buf: b[:100]}},
		{"unaligned address", Op{Off: 0, Buf: b[1:4097]}},
	} {
		if err := d.Submit([]Op{c.op}); !errors.Is(err, ErrMisaligned) {
			t.Errorf("%s: err = %v, want ErrMisaligned", c.name, err)
		}
	}
}

func TestFileOutOfRangeAndEOF(t *testing.T) {
	p := tempFile(t, 64<<10)
	d, err := OpenFile(p, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := ReadAt(d, make([]byte, 4096), 62<<10); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past the end: %v, want ErrOutOfRange", err)
	}
	if err := os.Truncate(p, 16<<10); err != nil { // the file shrinks under us
		t.Fatal(err)
	}
	if err := ReadAt(d, make([]byte, 4096), 32<<10); !errors.Is(err, ErrUnexpectedEOF) {
		t.Fatalf("read past EOF: %v, want ErrUnexpectedEOF", err)
	}
}

func TestFileDeallocatePunchesHole(t *testing.T) {
	p := tempFile(t, 1<<20)
	d, err := OpenFile(p, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := WriteAt(d, bytes.Repeat([]byte{0xab}, 64<<10), 0, placement.None); err != nil {
		t.Fatal(err)
	}
	if err := d.Deallocate([]Range{{Off: 0, Len: 32 << 10}}); err != nil {
		if errors.Is(err, ErrNotSupported) {
			t.Skipf("filesystem cannot punch holes: %v", err)
		}
		t.Fatal(err)
	}
	b := make([]byte, 64<<10)
	if err := ReadAt(d, b, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:32<<10], make([]byte, 32<<10)) || b[32<<10] != 0xab {
		t.Fatal("deallocated range does not read as zeroes, or too much was deallocated")
	}
	if err := d.Deallocate([]Range{{Off: 1 << 20, Len: 1}}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("out-of-range deallocate: %v", err)
	}
}

func TestFileOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"empty file", empty, "create it pre-sized"},
		{"directory", dir, "not a regular file"},
		{"char device", "/dev/null", "passthrough"},
	} {
		_, err := OpenFile(c.path, FileOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if err := CreateFile(filepath.Join(dir, "x"), 0); err == nil {
		t.Error("CreateFile of size 0 succeeded")
	}
}

func TestFileReadOnlyRefusesWrites(t *testing.T) {
	d, err := OpenFile(tempFile(t, 64<<10), FileOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := WriteAt(d, make([]byte, 4096), 0, placement.None); err == nil {
		t.Fatal("write on a read-only device succeeded")
	}
}

func TestLoopDeviceDirect(t *testing.T) {
	dev := looptest.New(t, 8<<20, looptest.Options{DirectIO: true})
	d, err := OpenFile(dev, DefaultFileOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	info := d.Info()
	if info.Kind != KindBlock || info.Size != 8<<20 || !info.Direct || info.LogicalBlock < 512 {
		t.Fatalf("info = %+v", info)
	}
	b, _ := Alloc(64 << 10)
	defer Free(b)
	for i := range b {
		b[i] = byte(i * 13)
	}
	if err := WriteAt(d, b, 1<<20, placement.None); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	r, _ := Alloc(64 << 10)
	defer Free(r)
	if err := ReadAt(d, r, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r, b) {
		t.Fatal("loop device read back different bytes")
	}
	if err := d.Deallocate([]Range{{Off: 1 << 20, Len: 64 << 10}}); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatalf("BLKDISCARD: %v", err)
	}
	// O_EXCL: a second exclusive open of the same block device fails while we hold it.
	if d2, err := OpenFile(dev, DefaultFileOptions()); err == nil {
		d2.Close()
		t.Fatal("second exclusive open succeeded")
	}
}

func TestMemDevice(t *testing.T) {
	m := NewMem(1<<20, 4096)
	if err := WriteAt(m, make([]byte, 100), 0, placement.None); !errors.Is(err, ErrMisaligned) {
		t.Fatalf("direct mem accepted a misaligned write: %v", err)
	}
	b := bytes.Repeat([]byte{1}, 4096)
	if err := WriteAt(m, b, 4096, 3); err != nil {
		t.Fatal(err)
	}
	if err := m.Deallocate([]Range{{Off: 4096, Len: 4096}}); err != nil {
		t.Fatal(err)
	}
	r := make([]byte, 4096)
	ReadAt(m, r, 4096)
	if !bytes.Equal(r, make([]byte, 4096)) {
		t.Fatal("deallocate did not zero")
	}
	if c := m.Counters(); c.Writes != 1 || c.Deallocates != 1 || c.Reads != 1 {
		t.Fatalf("counters = %+v", c)
	}
}
