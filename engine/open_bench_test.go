package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
)

// Restart time (issue 37; docs/engine.md, "Restart time"). BenchmarkOpen opens a filled
// cache the way rbctl serve does (Detect, then Open with the detection: checkpoint choice,
// decode, index build, slot header verification) on a sparse file with 1 KiB slots, the
// page cache dropped for the file before each open. Its size is what CI affords by default;
// RBCTL_BENCH_OPEN_ENTRIES sets it (docs/engine.md gives the 1M and 4M runs):
//
//	RBCTL_BENCH_OPEN_ENTRIES=1048576 go test ./engine -run '^$' -bench '^BenchmarkOpen$' -benchtime 3x
//
// BenchmarkOpenPhases times the CPU phases alone on an index built in memory (no device):
// decoding and checking a checkpoint without building its entries (decode: what selection
// does to both containers), building every entry and spelling its key (keys), and building
// the index from a lazily decoded checkpoint (index: entries built and keys spelled chunk
// by chunk, then indexed, as Open does).

func openBenchEntries(b *testing.B, def int) int {
	if s := os.Getenv("RBCTL_BENCH_OPEN_ENTRIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("RBCTL_BENCH_OPEN_ENTRIES=%q: want a positive count", s)
		}
		return n
	}
	return def
}

func BenchmarkOpen(b *testing.B) {
	n := openBenchEntries(b, 1<<17)
	c := benchConfig()
	c.MetaTotalBytes = MetaBytesFor(int64(n)*c.SlotBytes*2, c.SlotBytes, c.BlockAlign, CheckpointCompact)
	path := filepath.Join(b.TempDir(), "open.img")
	size := c.MetaTotalBytes + int64(n)*c.SlotBytes
	if err := blockdev.CreateFile(path, size); err != nil {
		b.Fatal(err)
	}
	openDev := func() blockdev.Device {
		dev, err := blockdev.OpenFile(path, blockdev.FileOptions{QueueDepth: 32})
		if err != nil {
			b.Fatal(err)
		}
		return dev
	}
	e, err := Format(openDev(), c)
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(n, 32)
	pl := make([][]byte, 256)
	for i := range pl {
		pl[i] = []byte{byte(i), 2, 3, 4, 5, 6, 7, 8}
	}
	for lo := 0; lo < n; lo += 256 {
		hi := min(lo+256, n)
		if r, err := e.PutMany(keys[lo:hi], pl[:hi-lo]); err != nil || len(r.Stored) != hi-lo {
			b.Fatalf("fill: %v %d", err, len(r.Stored))
		}
	}
	if err := e.Close(); err != nil { // a clean shutdown: final checkpoint
		b.Fatal(err)
	}
	keys = nil
	var detectS, openS float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f, _ := os.Open(path)
		unix.Fdatasync(int(f.Fd()))
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		b.StartTimer()
		t0 := time.Now()
		dev := openDev()
		d, err := Detect(dev)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		e, err := OpenWith(dev, d.Config, OpenOptions{Detected: &d})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if kept := e.Stats().Recovery.Kept; kept != n {
			b.Fatalf("kept %d of %d", kept, n)
		}
		b.StopTimer()
		e.CloseNoCheckpoint()
		b.StartTimer()
		detectS += t1.Sub(t0).Seconds()
		openS += t2.Sub(t1).Seconds()
	}
	b.ReportMetric(detectS/float64(b.N), "detect-s")
	b.ReportMetric(openS/float64(b.N), "open-s")
	b.ReportMetric(float64(n), "entries")
}

func BenchmarkOpenPhases(b *testing.B) {
	n := openBenchEntries(b, 1<<18)
	c := benchConfig()
	dev := nullDev{size: c.MetaTotalBytes + int64(n)*c.SlotBytes}
	src, err := newEngine(dev, c)
	if err != nil {
		b.Fatal(err)
	}
	fillIndex(src, benchKeys(n, 32))
	sn := src.takeSnapshot()
	payload := src.encodeCompact(sn)
	b.Run("decode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := decodeCompactLazy(payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
	})
	b.Run("keys", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			st, _ := decodeCompactLazy(payload)
			b.StartTimer()
			st.fillKeys()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
	})
	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			st, _ := decodeCompactLazy(payload) // as Open gets it: entries built as applied
			e, err := newEngine(dev, c)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			e.applyState(st)
			if e.live != int64(n) {
				b.Fatalf("live %d", e.live)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
	})
}
