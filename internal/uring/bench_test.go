package uring

import (
	"testing"
)

// BenchmarkNop measures one SQE round trip through the kernel (submit + wait + reap).
func BenchmarkNop(b *testing.B) {
	r := setupOrSkip(b, Options{Entries: 64})
	var c [1]CQE
	for b.Loop() {
		sqe, _ := r.GetSQE()
		sqe.PrepNop()
		if _, err := r.SubmitAndWait(1); err != nil {
			b.Fatal(err)
		}
		r.Reap(c[:])
	}
}

// BenchmarkNopBatch32 measures 32 NOPs per io_uring_enter; ns/op is per NOP.
func BenchmarkNopBatch32(b *testing.B) {
	r := setupOrSkip(b, Options{Entries: 64})
	cq := make([]CQE, 64)
	for b.Loop() {
		for i := 0; i < 32; i++ {
			sqe, _ := r.GetSQE()
			sqe.PrepNop()
		}
		if _, err := r.SubmitAndWait(32); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 32; {
			got += r.Reap(cq)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/nop")
}

type nopBatch struct{ n int }

func (nb *nopBatch) Len() int                   { return nb.n }
func (nb *nopBatch) Prep(_ int, sqe SQE)        { sqe.PrepNop() }
func (nb *nopBatch) Complete(_ int, _ CQE) bool { return false }

// BenchmarkExecutorNop64 measures the Executor's hand-off and matching overhead: batches of
// 64 NOPs at depth 32 from the calling goroutine to the ring's owner and back.
func BenchmarkExecutorNop64(b *testing.B) {
	for _, opt := range []struct {
		name string
		o    Options
	}{{"plain", Options{}}, {"single-issuer+defer", Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}}} {
		b.Run(opt.name, func(b *testing.B) {
			e, err := NewExecutor(opt.o, 32)
			if err != nil {
				b.Skip(err)
			}
			defer e.Close()
			nb := &nopBatch{n: 64}
			for b.Loop() {
				if err := e.Run(nb); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/item")
		})
	}
}

// BenchmarkRead4K issues fixed 4 KiB O_DIRECT reads at queue depth 32 on a sparse temp file:
// holes read as zeros without device I/O, so this measures the ring and filesystem path.
func BenchmarkRead4K(b *testing.B) {
	r := setupOrSkip(b, Options{Entries: 64})
	f := tempFile(b, 8<<20, true)
	buf := offHeap(b, 32*4096)
	if err := r.RegisterBuffers([][]byte{buf}); err != nil {
		b.Fatal(err)
	}
	cq := make([]CQE, 64)
	b.SetBytes(32 * 4096)
	for n := 0; b.Loop(); n++ {
		for i := 0; i < 32; i++ {
			sqe, _ := r.GetSQE()
			sqe.PrepReadFixed(int32(f.Fd()), buf[i*4096:(i+1)*4096], uint64(((n*32+i)%2048)*4096), 0)
		}
		if _, err := r.SubmitAndWait(32); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 32; {
			k := r.Reap(cq)
			for _, c := range cq[:k] {
				if c.Res != 4096 {
					b.Fatalf("read res %d", c.Res)
				}
			}
			got += k
		}
	}
}
