package ftl

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. Benchmarks report rates per CPU second as
// well as per wall second, because the build machine's cores are shared and wall time
// includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRandomWrite measures simulated single-mapping-unit writes per second in steady
// state (uniform random LBAs, greedy GC) on a ~1M-unit device: 2048 RUs of 512 units.
// The reported unit-writes/s counts host writes; GC relocations are work done per write.
func BenchmarkRandomWrite(b *testing.B) {
	for _, rho := range []float64{0.07, 0.28, 0.5} {
		b.Run(fmt.Sprintf("rho=%.2f", rho), func(b *testing.B) {
			const mu, upr, rus = 4096, 512, 2048
			logical := int64(float64(upr*rus) / (1 + rho))
			m, err := New(Config{MappingUnit: mu, LogicalBytes: logical * mu, RUBytes: upr * mu, RUsPerGroup: rus})
			if err != nil {
				b.Fatal(err)
			}
			if err := m.FillSequential(); err != nil {
				b.Fatal(err)
			}
			r := rng(42)
			n := uint64(logical)
			for range logical { // warm-up: 1× capacity
				_ = m.Write(int64(r.below(n)), 1, 0)
			}
			w := m.Window()
			b.ResetTimer()
			c0 := cpuTime()
			for range b.N {
				if err := m.Write(int64(r.below(n)), 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "unit-writes/s")
			b.ReportMetric(float64(b.N)/(cpuTime()-c0).Seconds(), "unit-writes/cpu-s")
			b.ReportMetric(w.Stats().WAF(), "WAF")
		})
	}
}

// BenchmarkSequentialWrite measures 64-unit sequential writes (no GC relocation after the
// first pass: every victim is empty).
func BenchmarkSequentialWrite(b *testing.B) {
	const mu, upr, rus = 4096, 512, 2048
	logical := int64(upr * rus * 10 / 11)
	m, err := New(Config{MappingUnit: mu, LogicalBytes: logical * mu, RUBytes: upr * mu, RUsPerGroup: rus})
	if err != nil {
		b.Fatal(err)
	}
	lba := int64(0)
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		if lba+64 > logical {
			lba = 0
		}
		if err := m.Write(lba, 64, 0); err != nil {
			b.Fatal(err)
		}
		lba += 64
	}
	b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "unit-writes/s")
	b.ReportMetric(float64(b.N)*64/(cpuTime()-c0).Seconds(), "unit-writes/cpu-s")
}
