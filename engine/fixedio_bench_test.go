package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// BenchmarkDataPath: PutMany + LoadManyInto + DeleteMany of 32 keys per iteration with
// 256 KiB slots (QueueDepth 32), by staging mode:
//
//	arena        the registered buffer arena (default)
//	unregistered the arena, not registered (NoRegisterBuffers)
//	per-call     no arena (BufferPoolBytes -1): buffers allocated per call, as before the arena
//
// on a Direct memory device (engine CPU cost: staging, copies, CRC) and, when the kernel has io_uring,
// on an O_DIRECT file through the io_uring backend (fixed vs plain SQEs). Loads read into
// misaligned caller buffers so that they bounce through the staging buffers too.
func BenchmarkDataPath(b *testing.B) {
	modes := []struct {
		name string
		mod  func(*Config)
	}{
		{"arena", func(*Config) {}},
		{"unregistered", func(c *Config) { c.NoRegisterBuffers = true }},
		{"per-call", func(c *Config) { c.BufferPoolBytes = -1 }},
	}
	const slot, batch = 256 << 10, 32
	size := int64(1<<20 + 4*batch*slot)
	devs := []struct {
		name string
		open func(b *testing.B) blockdev.Device
	}{
		{"mem", func(*testing.B) blockdev.Device { return blockdev.NewMem(size, 4096) }},
		{"uring", func(b *testing.B) blockdev.Device {
			p := filepath.Join(b.TempDir(), "bench.img")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				b.Fatal(err)
			}
			if err := os.Truncate(p, size); err != nil {
				b.Fatal(err)
			}
			d, err := blockdev.OpenUring(p, blockdev.UringOptions{QueueDepth: batch, Rings: 1})
			if errors.Is(err, blockdev.ErrNotSupported) {
				b.Skipf("no io_uring: %v", err)
			}
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
	}
	for _, dv := range devs {
		for _, m := range modes {
			b.Run(fmt.Sprintf("%s/%s", dv.name, m.name), func(b *testing.B) {
				c := DefaultConfig()
				c.SlotBytes, c.MetaTotalBytes, c.QueueDepth, c.Periodic = slot, 1<<20, batch, false
				c.FinalCheckpoint = false
				m.mod(&c)
				e, err := Format(dv.open(b), c)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				keys := benchKeys(batch, 32)
				pay := make([][]byte, batch)
				bufs := make([][]byte, batch)
				for i := range pay {
					pay[i] = make([]byte, slot-4096)
					for j := range pay[i] {
						pay[i][j] = byte(i + j)
					}
					bufs[i] = make([]byte, slot+1)[1:]
				}
				b.SetBytes(int64(2 * batch * (slot - 4096)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if r, err := e.PutMany(keys, pay); err != nil || len(r.Stored) != batch {
						b.Fatalf("put: %v, stored %d", err, len(r.Stored))
					}
					if ok, err := e.LoadManyInto(keys, bufs); err != nil || !ok[batch-1] {
						b.Fatalf("load: %v", err)
					}
					e.DeleteMany(keys, true)
				}
				b.StopTimer()
				if d, ok := e.Device().(*blockdev.UringDevice); ok {
					s := d.Stats()
					b.ReportMetric(float64(s.FixedOps)/float64(s.FixedOps+s.PlainOps), "fixed-frac")
				}
			})
		}
	}
}
