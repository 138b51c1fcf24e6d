package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
	"golang.org/x/sys/unix"
)

const benchEntries = 1 << 20

// nullDev claims a size, discards writes and reads zeroes: index and checkpoint benchmarks
// measure the engine, not a device.
type nullDev struct{ size int64 }

func (d nullDev) Info() blockdev.Info {
	return blockdev.Info{Path: "null:", Kind: blockdev.KindMemory, Size: d.size, LogicalBlock: 1}
}
func (nullDev) Submit(ops []blockdev.Op) error {
	for i := range ops {
		ops[i].N, ops[i].Err = len(ops[i].Buf), nil
	}
	return nil
}
func (nullDev) Deallocate([]blockdev.Range) error { return nil }
func (nullDev) Flush() error                      { return nil }
func (nullDev) Close() error                      { return nil }

// benchKeys are LMCache object keys: a 26-byte model name, 4 ranks, a 32-byte (sha256)
// chunk hash, 8 tenants as cache_salt.
func benchKeys(n, hashLen int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		h := sha256.Sum256(b[:])
		keys[i] = ObjectKey("meta-llama/Llama-3.1-8B-Instruct", uint32(i%4), h[:hashLen], fmt.Sprintf("tenant-%d", i%8))
	}
	return keys
}

func benchConfig() Config {
	c := DefaultConfig()
	c.BlockAlign, c.HeaderBytes, c.SlotBytes = 512, 512, 1024
	c.MetaTotalBytes = 256 << 20
	c.Periodic = false
	return c
}

// fillIndex inserts keys as live entries straight into the index (no I/O).
func fillIndex(e *Engine, keys []Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range keys {
		s := e.allocSlot(placement.None)
		r := &e.slots[s]
		r.state, r.size, r.crc, r.flags = stLive, 100, 1, flHasCRC
		e.stamp++
		r.stamp = e.stamp
		e.bind(s, k, e.entryCost(k, 100, nil))
		e.live++
		e.dirty++
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIndexBytesPerEntry: heap bytes of the whole index (per-slot records, hash table,
// key arena, dictionaries) per entry at 1M entries, keys included, measured with
// runtime.MemStats. The device has exactly 1M slots.
func BenchmarkIndexBytesPerEntry(b *testing.B) {
	for _, hl := range []int{32, 8} {
		b.Run(fmt.Sprintf("hash%dB", hl), func(b *testing.B) {
			keys := benchKeys(benchEntries, hl)
			c := benchConfig()
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				e, err := newEngine(nullDev{c.MetaTotalBytes + benchEntries*c.SlotBytes}, c)
				if err != nil {
					b.Fatal(err)
				}
				fillIndex(e, keys)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/benchEntries, "B/entry")
				b.ReportMetric(float64(len(keys[0].String())), "keylen")
				runtime.KeepAlive(e)
			}
		})
	}
}

var benchOnce struct {
	sync.Once
	e    *Engine
	keys []Key
}

func benchEngine(b *testing.B) (*Engine, []Key) {
	benchOnce.Do(func() {
		c := benchConfig()
		keys := benchKeys(benchEntries, 32)
		e, err := newEngine(nullDev{c.MetaTotalBytes + benchEntries*c.SlotBytes}, c)
		if err != nil {
			panic(err)
		}
		fillIndex(e, keys)
		e.startAsync()
		benchOnce.e, benchOnce.keys = e, keys
	})
	return benchOnce.e, benchOnce.keys
}

// BenchmarkExistsMany: lookups per second on one goroutine (one core) at 1M entries, in
// batches of 256 keys, half of them misses.
func BenchmarkExistsMany(b *testing.B) {
	e, keys := benchEngine(b)
	misses := benchKeys(4096, 31) // same shape, different hash length: never present
	batch := make([]Key, 256)
	runtime.LockOSThread() // so the thread CPU clock measures this goroutine only
	defer runtime.UnlockOSThread()
	var wall time.Duration
	var cpu int64
	n := 0
	var sink int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The caller's keys are hot in its cache (it just built them); the index is not.
		for j := range batch {
			if j%2 == 0 {
				batch[j] = keys[(i*977+j*131)%len(keys)]
			} else {
				batch[j] = misses[(i+j)%len(misses)]
			}
			sink += len(batch[j].enc) + int(batch[j].enc[len(batch[j].enc)-1])
		}
		t0, c0 := time.Now(), threadCPU()
		e.ExistsMany(batch, false)
		cpu += threadCPU() - c0
		wall += time.Since(t0)
		n += len(batch)
	}
	b.StopTimer()
	_ = sink
	b.ReportMetric(float64(n)/wall.Seconds(), "keys/s")
	// On an oversubscribed machine wall time includes waiting for a CPU; this is the rate
	// per second of CPU actually used by the looking-up thread.
	b.ReportMetric(float64(n)/(float64(cpu)/1e9), "keys/cpu-s")
}

// BenchmarkCheckpoint1M: a full checkpoint of 1M entries while another goroutine keeps
// putting and deleting; reports the longest index-lock hold, the checkpoint's bytes per
// entry and its duration (compact and LMCache v1 JSON).
func BenchmarkCheckpoint1M(b *testing.B) {
	for _, f := range []CheckpointFormat{CheckpointCompact, CheckpointLMCacheV1} {
		b.Run(string(f), func(b *testing.B) {
			c := benchConfig()
			c.CheckpointFormat = f
			c.MetaTotalBytes = 1 << 30
			keys := benchKeys(benchEntries, 32)
			e, err := newEngine(nullDev{c.MetaTotalBytes + (benchEntries+4096)*c.SlotBytes}, c)
			if err != nil {
				b.Fatal(err)
			}
			fillIndex(e, keys[:benchEntries-4096])
			e.startAsync()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // concurrent mutations during the snapshot
				defer wg.Done()
				extra := keys[benchEntries-4096:]
				p := [][]byte{{1}}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := extra[i%len(extra)]
					e.PutMany([]Key{k}, p)
					e.DeleteMany([]Key{k}, false)
				}
			}()
			b.ResetTimer()
			var dur time.Duration
			for i := 0; i < b.N; i++ {
				e.mu.Lock()
				e.dirty++
				e.mu.Unlock()
				e.st.maxHold.Store(0)
				e.st.maxHoldCPU.Store(0)
				t0 := time.Now()
				if err := e.CheckpointNow(); err != nil {
					b.Fatal(err)
				}
				dur += time.Since(t0)
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			s := e.Stats()
			b.ReportMetric(float64(s.MaxLockHold.Nanoseconds()), "max-lock-ns")
			b.ReportMetric(float64(s.MaxLockHoldCPU.Nanoseconds()), "max-lock-cpu-ns")
			b.ReportMetric(float64(s.CheckpointBytes)/float64(s.CheckpointEntries), "ckpt-B/entry")
			b.ReportMetric(float64(dur.Milliseconds())/float64(b.N), "ckpt-ms")
		})
	}
}

// BenchmarkRecovery1M: Open with verify (8 readers) of 1M entries on a sparse file with
// 1 KiB slots (512 B header), page cache dropped for the file first (cold reads).
func BenchmarkRecovery1M(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 1 GiB")
	}
	c := benchConfig()
	path := filepath.Join(b.TempDir(), "recovery.img")
	size := c.MetaTotalBytes + benchEntries*c.SlotBytes
	if err := blockdev.CreateFile(path, size); err != nil {
		b.Fatal(err)
	}
	dev, err := blockdev.OpenFile(path, blockdev.FileOptions{QueueDepth: 32})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Format(dev, c)
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(benchEntries, 32)
	pl := make([][]byte, 256)
	for i := range pl {
		pl[i] = []byte{byte(i), 2, 3, 4, 5, 6, 7, 8}
	}
	for lo := 0; lo < len(keys); lo += 256 {
		if r, err := e.PutMany(keys[lo:lo+256], pl); err != nil || len(r.Stored) != 256 {
			b.Fatalf("fill: %v %d", err, len(r.Stored))
		}
	}
	if err := e.CheckpointNow(); err != nil {
		b.Fatal(err)
	}
	ckptBytes := e.Stats().CheckpointBytes
	e.CloseNoCheckpoint()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f, _ := os.Open(path)
		unix.Fdatasync(int(f.Fd()))
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		b.StartTimer()
		dev, err := blockdev.OpenFile(path, blockdev.FileOptions{QueueDepth: 32})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		e, err := Open(dev, c)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		rep := e.Stats().Recovery
		if rep.Kept != benchEntries {
			b.Fatalf("kept %d", rep.Kept)
		}
		e.CloseNoCheckpoint()
		b.ReportMetric(d.Seconds(), "recovery-s")
	}
	b.ReportMetric(float64(ckptBytes)/benchEntries, "ckpt-B/entry")
}
