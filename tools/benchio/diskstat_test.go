package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
)

func TestParseDiskStat(t *testing.T) {
	c, err := parseDiskStat("  389897    22963 139594429   826500   577133   208460 497609771  4305778        0   404372  5212422    98393       69 201023160    70744    41082     9399\n")
	if err != nil {
		t.Fatal(err)
	}
	want := diskCounters{readIOs: 389897, readMerges: 22963, readSectors: 139594429, readTicks: 826500, writeIOs: 577133, writeMerges: 208460,
		writeSectors: 497609771, writeTicks: 4305778, discardIOs: 98393, discardSectors: 201023160, flushIOs: 41082, flushTicks: 9399}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if _, err := parseDiskStat("1 2 3"); err == nil {
		t.Error("a short line parsed")
	}
	if _, err := parseDiskStat("1 2 3 4 5 6 7 8 9 10 x"); err == nil {
		t.Error("a non-number parsed")
	}
}

// 64 MiB written by the tool, 1024 requests of 64 KiB with 512 merges reached the disk and
// spent 2048 ms there in all (2 ms each).
func TestDiffDisk(t *testing.T) {
	a := diskCounters{writeIOs: 10, writeMerges: 5, writeSectors: 100, writeTicks: 7}
	b := diskCounters{writeIOs: 10 + 1024, writeMerges: 5 + 512, writeSectors: 100 + 64<<11, writeTicks: 7 + 2048, readTicks: 99}
	d := diffDisk(a, b, true, 64<<20)
	if !d.ok || d.reqPerMiB != 16 || d.kibPerReq != 64 || d.mergesPerMiB != 8 || d.bytesRatio != 1 || d.msPerReq != 2 {
		t.Fatalf("%+v", d)
	}
	if d := diffDisk(a, b, false, 64<<20); d.ok {
		t.Errorf("reads counted for a write window: %+v", d)
	}
	if d := diffDisk(a, b, true, 32<<20); math.Abs(d.bytesRatio-2) > 1e-9 {
		t.Errorf("bytes ratio %v, want 2", d.bytesRatio)
	}
}

func TestFioBufferHugePages(t *testing.T) {
	if n := fioBufferHugePages(32, 1<<20); n != 18 {
		t.Errorf("qd 32 × 1 MiB: %d huge pages, want 18", n)
	}
	if n := fioBufferHugePages(32, 64<<10); n != 3 {
		t.Errorf("qd 32 × 64 KiB: %d huge pages, want 3", n)
	}
	if n := parseMeminfo("MemTotal: 1 kB\nHugePages_Free:       7\n", "HugePages_Free"); n != 7 {
		t.Errorf("parseMeminfo: %d", n)
	}
}

// The replay log repeats the recorded writes until it holds the bytes asked for.
func TestWriteIologRepeats(t *testing.T) {
	var l writeLog
	l.on.Store(true)
	l.add([]blockdev.Op{{Write: true, Off: 4096, Buf: make([]byte, 8192)}, {Off: 0, Buf: make([]byte, 4096)}})
	l.addFlush()
	if l.flushes() != 1 {
		t.Fatalf("%d flushes logged, want 1", l.flushes())
	}
	for _, flushes := range []bool{false, true} {
		path, err := l.writeIolog("/dev/x", 4096, 3*8192, flushes)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		one := "/dev/x write 4096 4096\n/dev/x write 8192 4096\n" // cut to the piece size
		if flushes {
			one += "/dev/x datasync 0 0\n"
		}
		want := "fio version 2 iolog\n/dev/x add\n/dev/x open\n" + strings.Repeat(one, 3) + "/dev/x close\n"
		if string(b) != want {
			t.Fatalf("flushes %v: got\n%s\nwant\n%s", flushes, b, want)
		}
	}
}

// rbctl-replay writes and deallocates exactly the logged ranges, flushes included, and
// leaves the rest alone.
func TestRbctlReplayWritesTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.dat")
	old := bytes.Repeat([]byte{0xab}, 4<<16)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	var l writeLog
	l.on.Store(true)
	l.add([]blockdev.Op{{Write: true, Off: 0, Buf: make([]byte, 1<<16)}})
	l.addFlush()
	l.add([]blockdev.Op{{Write: true, Off: 2 << 16, Buf: make([]byte, 1<<16)}, {Off: 3 << 16, Buf: make([]byte, 1<<16)}})
	l.addDealloc([]blockdev.Range{{Off: 1 << 16, Len: 1 << 16}})
	if l.flushes() != 1 || l.deallocs() != 1 {
		t.Fatalf("logged %d flushes and %d deallocations, want 1 and 1", l.flushes(), l.deallocs())
	}
	// The replay repeats the log until its window ends; a loaded machine (one slow
	// fdatasync) can end a 50 ms window before the first pass reaches the deallocation, so
	// the window grows until one pass fits — what is checked is the file, not the timing.
	var changed []bool
	for _, runtime := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second} {
		if err := os.WriteFile(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		c := config{file: path, qd: 4, submitters: 1, batch: 4, ring: "default", fixed: true, replayFlushes: true,
			ramp: 10 * time.Millisecond, runtime: runtime}
		r, err := rbctlReplay(c, 1<<16, &l)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, blockdev.ErrNotSupported) {
			t.Skipf("no O_DIRECT io_uring file with hole punching here: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.bw < 0 {
			t.Fatalf("replayed %v bytes/s", r.bw)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		changed = changed[:0]
		for i := range 4 {
			changed = append(changed, !bytes.Equal(b[i<<16:(i+1)<<16], old[:1<<16]))
		}
		if changed[1] { // the deallocation, the log's last entry, ran: one pass was replayed
			break
		}
	}
	// Blocks 0 and 2 written, 1 deallocated (and refilled after the run), 3 only read (a
	// read is not logged): untouched.
	if want := []bool{true, true, true, false}; !slices.Equal(changed, want) {
		t.Errorf("blocks changed %v, want %v", changed, want)
	}
}

// A write longer than the piece is cut at consecutive offsets; flushes and deallocations are
// kept whole.
func TestSplitCutsLongWrites(t *testing.T) {
	got := split([]logEntry{{off: 0, n: 10}, {kind: logFlush}, {off: 100, n: 4}, {off: 200, n: 9, kind: logDealloc}}, 4)
	want := []logEntry{{off: 0, n: 4}, {off: 4, n: 4}, {off: 8, n: 2}, {kind: logFlush}, {off: 100, n: 4}, {off: 200, n: 9, kind: logDealloc}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
