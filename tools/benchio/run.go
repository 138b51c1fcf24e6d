package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/uring"
)

// runState is what the submitting goroutines of one run share: the bytes they moved, the
// stop flag, and the first error, which stops them all.
type runState struct {
	bytes atomic.Int64
	stop  atomic.Bool
	once  sync.Once
	err   error // read only after the goroutines are done
}

func (s *runState) fail(err error) {
	s.once.Do(func() { s.err = err })
	s.stop.Store(true)
}

// window is one measured window of a run: its counters after the ramp and after the runtime.
type window struct {
	b0, b1     int64
	t0, t1     time.Time
	cpu0, cpu1 float64
	o0, o1     uring.Occupancy
	d0, d1     diskCounters
	disk       bool // both disk readings succeeded
}

// measure waits the ramp, reads the counters, waits the runtime and reads them again; it
// then stops the run (the caller waits for its goroutines). during, when not nil, is called
// with true right after the first reading and with false right before the second.
func measure(c config, st *runState, occ func() uring.Occupancy, during func(on bool)) window {
	var w window
	statPath := diskStatPath(c.file)
	time.Sleep(c.ramp)
	w.b0, w.t0, w.cpu0, w.o0 = st.bytes.Load(), time.Now(), cpuSeconds(), occ()
	d0, ok0 := readDiskStat(statPath)
	if during != nil {
		during(true)
	}
	time.Sleep(c.runtime)
	if during != nil {
		during(false)
	}
	d1, ok1 := readDiskStat(statPath)
	w.b1, w.t1, w.cpu1, w.o1 = st.bytes.Load(), time.Now(), cpuSeconds(), occ()
	w.d0, w.d1, w.disk = d0, d1, ok0 && ok1
	st.stop.Store(true)
	return w
}

// result is the window's rate, mean depth, disk figures and CPU per GB.
func (w window) result(write bool) result {
	moved := w.b1 - w.b0
	r := result{bw: float64(moved) / w.t1.Sub(w.t0).Seconds(), depth: meanDepth(w.o0, w.o1)}
	if w.disk {
		r.disk = diffDisk(w.d0, w.d1, write, moved)
	}
	if moved > 0 {
		r.cpuPerGB = (w.cpu1 - w.cpu0) / (float64(moved) / 1e9)
	}
	return r
}

// openPool opens the io_uring device as the rbctl row does and allocates n bytes of
// incompressible buffers for it (registered with -fixed; in 4 KiB pages when fio's are),
// seeded with seed. close releases both.
func openPool(c config, n int, seed [32]byte) (d rbDev, pool []byte, close func(), err error) {
	if d, err = openDev(c); err != nil {
		return nil, nil, nil, err
	}
	if pool, err = blockdev.Alloc(n); err != nil {
		d.Close()
		return nil, nil, nil, err
	}
	close = func() {
		d.Close() // first: no op may still use the pool
		blockdev.Free(pool)
	}
	smallPages(c, pool)
	if r, ok := d.(*blockdev.UringDevice); ok && c.fixed {
		if err := r.RegisterBuffers([][]byte{pool}); err != nil {
			close()
			return nil, nil, nil, fmt.Errorf("registering %d bytes of buffers: %w", n, err)
		}
	}
	// Incompressible contents, like fio's default buffers: a virtual disk that compresses or
	// deduplicates must not flatter either side.
	rand.NewChaCha8(seed).Read(pool)
	return d, pool, close, nil
}
