package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// BenchmarkLoadPath is engine-get of make bench-io as a Go benchmark, for profiling
// (go test -run X -bench LoadPath -cpuprofile cpu.out ./engine/): an O_DIRECT file through
// the io_uring backend at QD 32, filled to 90 %, then two goroutines each calling
// LoadManyInto with 64 random live keys into aligned buffers (direct reads, CRC checked).
// RBCTL_BENCH_DIR picks the file's directory (default: the test's temp dir).
func BenchmarkLoadPath(b *testing.B) {
	for _, slot := range []int64{1 << 20, 64 << 10} {
		b.Run(fmt.Sprintf("slot=%dKiB", slot>>10), func(b *testing.B) {
			const callers, batch, fileBytes = 2, 64, 512 << 20
			dir := os.Getenv("RBCTL_BENCH_DIR")
			if dir == "" {
				dir = b.TempDir()
			}
			path := filepath.Join(dir, fmt.Sprintf("loadpath-%d.img", os.Getpid()))
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			defer os.Remove(path)
			if err := f.Truncate(fileBytes); err != nil {
				b.Fatal(err)
			}
			f.Close()
			dev, err := blockdev.OpenUring(path, blockdev.UringOptions{QueueDepth: 32, Rings: 1})
			if errors.Is(err, blockdev.ErrNotSupported) {
				b.Skip(err)
			}
			if err != nil {
				b.Skip(err) // e.g. a temp dir without O_DIRECT
			}
			cfg := engine.DefaultConfig()
			cfg.SlotBytes, cfg.Periodic = slot, false
			cfg.MetaTotalBytes = engine.MetaBytesFor(fileBytes, slot, cfg.BlockAlign, cfg.CheckpointFormat)
			e, err := engine.Format(dev, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			payload := int(e.Layout().PayloadBytes())
			n := int(float64(e.Layout().MaxSlots)*0.9) / batch * batch
			keys := make([]engine.Key, n)
			pay := make([][]byte, batch)
			rng := rand.NewChaCha8([32]byte{1})
			for i := range pay {
				pay[i] = make([]byte, payload)
				rng.Read(pay[i])
			}
			for i := range keys {
				keys[i] = engine.ObjectKey("bench/load", 0, fmt.Appendf(nil, "%08d", i), "")
			}
			for i := 0; i < n; i += batch {
				if r, err := e.PutMany(keys[i:i+batch], pay); err != nil || len(r.Stored) != batch {
					b.Fatalf("fill: %v", err)
				}
			}
			var wg sync.WaitGroup
			per := (b.N + callers - 1) / callers
			b.SetBytes(int64(batch * payload))
			b.ResetTimer()
			cpu0 := processCPU()
			for c := 0; c < callers; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mem, err := blockdev.Alloc(batch * int(slot))
					if err != nil {
						b.Error(err)
						return
					}
					defer blockdev.Free(mem)
					bufs := make([][]byte, batch)
					for i := range bufs {
						bufs[i] = mem[i*int(slot) : i*int(slot)+payload]
					}
					r := rand.New(rand.NewPCG(uint64(c), 9))
					ks := make([]engine.Key, batch)
					for it := 0; it < per; it++ {
						for i := range ks {
							ks[i] = keys[r.IntN(n)]
						}
						ok, err := e.LoadManyInto(ks, bufs)
						if err != nil || !ok[0] || !ok[batch-1] {
							b.Errorf("load: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if gb := float64(b.N) * float64(batch*payload) / 1e9; gb > 0 {
				b.ReportMetric((processCPU()-cpu0)/gb, "cpu-s/GB")
			}
			if st := e.Stats(); st.ChecksumErrors != 0 {
				b.Fatalf("%d checksum errors", st.ChecksumErrors)
			}
		})
	}
}

// processCPU is the process's user+system CPU seconds so far.
func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
