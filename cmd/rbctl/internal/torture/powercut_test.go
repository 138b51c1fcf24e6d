package torture

// Power-cut test: where SIGKILL leaves the page cache intact, a power cut loses writes the
// device had acknowledged but not flushed, in any subset and order, some torn. powerDev
// models a volatile write cache; the engine must order its flushes so that a completed
// checkpoint, and every slot it references, survives.

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

type pendingWrite struct {
	off  int64
	data []byte
}

// powerDev passes I/O to a Mem (reads see every completed write) and keeps what a power cut
// would preserve: the image as of the last Flush, plus the writes since.
type powerDev struct {
	mu      sync.Mutex
	inner   *blockdev.Mem
	durable []byte
	pending []pendingWrite
}

func newPowerDev(img []byte) *powerDev {
	m := blockdev.NewMem(int64(len(img)), 0)
	copy(m.Bytes(), img)
	return &powerDev{inner: m, durable: bytes.Clone(img)}
}

func (d *powerDev) Info() blockdev.Info { return d.inner.Info() }

func (d *powerDev) Submit(ops []blockdev.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.inner.Submit(ops)
	for _, op := range ops {
		if op.Write && op.N > 0 { // a vectored write (Tail) is one write of Buf then Tail
			data := append(bytes.Clone(op.Buf), op.Tail...)
			d.pending = append(d.pending, pendingWrite{op.Off, data[:op.N]})
		}
	}
	return err
}

// VectoredWrites: the engine's zero-copy puts reach the power-cut model too.
func (d *powerDev) VectoredWrites() bool { return true }

func (d *powerDev) Deallocate(rs []blockdev.Range) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.inner.Deallocate(rs); err != nil {
		return err
	}
	for _, r := range rs {
		d.pending = append(d.pending, pendingWrite{r.Off, make([]byte, r.Len)})
	}
	return nil
}

func (d *powerDev) Flush() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.pending {
		copy(d.durable[w.off:], w.data)
	}
	d.pending = d.pending[:0]
	return d.inner.Flush()
}

func (d *powerDev) Close() error { return d.inner.Close() }

// cut returns the image after a power cut: the flushed image plus a random subset of the
// unflushed writes (the cache may have written any of them back, in any order), some torn
// at a 512-byte sector. The caller holds d.mu.
func (d *powerDev) cut(rng *rand.Rand) (img []byte, kept, dropped, torn int) {
	img = bytes.Clone(d.durable)
	for _, w := range d.pending {
		switch rng.IntN(4) {
		case 0, 1:
			copy(img[w.off:], w.data)
			kept++
		case 2:
			dropped++
		case 3:
			n := rng.IntN(len(w.data)/512+1) * 512
			copy(img[w.off:], w.data[:min(n, len(w.data))])
			torn++
		}
	}
	return img, kept, dropped, torn
}

func TestPowerCut(t *testing.T) {
	rounds := 24
	if testing.Short() {
		rounds = 6
	}
	g := DefaultGeometry()
	max := g.MaxPayload()
	keys := uint64(2 * g.Slots)
	rng := rand.New(rand.NewPCG(7, 11))
	// A formatted, cleanly closed image to start from.
	mem := blockdev.NewMem(g.DeviceSize(), 0)
	e, err := engine.Format(mem, EngineConfig(g, engine.CheckpointCompact, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	img := bytes.Clone(mem.Bytes())
	baseline := map[uint64]uint64{}
	var sum Summary
	var kept, dropped, torn int
	var vectored, puts int64 // the engine's puts written in place (zero-copy), and all
	for round := 1; round <= rounds; round++ {
		format := []engine.CheckpointFormat{engine.CheckpointCompact, engine.CheckpointLMCacheV1}[round%2]
		cfg := EngineConfig(g, format, round%3 == 0)
		dev := newPowerDev(img)
		e, err := engine.Open(dev, cfg)
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		lg, err := createSideLog(filepath.Join(t.TempDir(), "power.log"))
		if err != nil {
			t.Fatal(err)
		}
		vers := make([]uint64, keys)
		for idx, v := range baseline {
			vers[idx] = v
		}
		var (
			stop atomic.Bool
			ctr  atomic.Uint64
			wg   sync.WaitGroup
		)
		const workers = 3
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				buf := make([]byte, max)
				for !stop.Load() {
					idx := uint64(w) + uint64(workers)*uint64(r.IntN(int(keys)/workers))
					if err := writerStep(e, lg, r, KeyFor(idx), idx, &vers[idx], uint64(round)<<32|ctr.Add(1), max, buf); err != nil {
						t.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Add(1)
		go func(seed uint64) { // checkpointer, as in the writer process
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 99))
			for n := uint64(1); !stop.Load(); n++ {
				time.Sleep(time.Duration(5+r.IntN(35)) * time.Millisecond)
				lg.put("S %d", n)
				if e.CheckpointNow() == nil {
					lg.put("C %d %d", n, e.Stats().CheckpointSeq)
				}
			}
		}(rng.Uint64())
		time.Sleep(time.Duration(20+rng.IntN(120)) * time.Millisecond)
		// The cut: what the log holds and what the device kept, at one instant.
		lg.mu.Lock()
		dev.mu.Lock()
		nrec := lg.n
		cutImg, k, d, tn := dev.cut(rng)
		dev.mu.Unlock()
		lg.mu.Unlock()
		kept, dropped, torn = kept+k, dropped+d, torn+tn
		stop.Store(true)
		wg.Wait()
		st := e.Stats()
		vectored, puts = vectored+st.PutsVectored, puts+st.Puts
		e.CloseNoCheckpoint()
		lg.close()
		recs, err := ReadLog(lg.f.Name())
		if err != nil {
			t.Fatal(err)
		}
		ex := Expect(baseline, recs[:nrec])
		sum.Puts += ex.Puts
		sum.Deletes += ex.Deletes
		sum.Checkpoints += ex.Checkpoints
		sum.WriterWrong += ex.WriterWrong
		sum.WriterUnloadable += ex.WriterUnloadable

		rm := blockdev.NewMem(int64(len(cutImg)), 0)
		copy(rm.Bytes(), cutImg)
		re, err := engine.Open(rm, cfg)
		if err != nil {
			t.Fatalf("round %d: recovery after the power cut: %v", round, err)
		}
		img = bytes.Clone(cutImg) // the next round starts from the cut image, before the fill
		res, state := Verify(re, g, ex, true)
		re.CloseNoCheckpoint()
		sum.add(round, "power cut", res)
		baseline = state
	}
	t.Logf("%d power cuts: %d acked puts, %d deletes, %d checkpoints; unflushed writes at the cuts: %d kept, %d dropped, %d torn; %d keys verified byte-exact, %d acknowledged-before-checkpoint checks, %d free slots filled; engine puts %d, %d of them written in place (vectored)",
		rounds, sum.Puts, sum.Deletes, sum.Checkpoints, kept, dropped, torn, sum.KeysVerified, sum.MustSurvive, sum.FilledSlots, puts, vectored)
	if v := sum.Violations(); v != 0 {
		t.Fatalf("%d violations: %v", v, sum.Problems)
	}
	if sum.Checkpoints == 0 || sum.KeysVerified == 0 || dropped+torn == 0 || vectored == 0 || vectored == puts {
		t.Fatalf("the test did not exercise anything: %+v", sum)
	}
}
