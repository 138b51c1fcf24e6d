package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// The engine rows: engine.PutMany and engine.LoadManyInto on the same file and ring setup
// as the device row, slot_bytes = the block size, DeallocateOnDelete on (the default of
// rbctl format and bench).
//
// engine-put: each submitter owns a FIFO of its keys; once the cache is filled to
// fillFraction, every PutMany of batch keys is preceded by a DeleteMany of its batch oldest
// keys (the eviction an LRU cache does when full), so every freed slot goes through the
// deallocator. engine-get: the cache is filled first, then each submitter loads batch
// random live keys per LoadManyInto into aligned buffers. Bytes are device bytes: a put
// writes one whole slot (header + payload = bs), a load reads the payload (bs - 4 KiB).

// fillFraction leaves free slots, as a cache evicting below a high-water mark does.
const fillFraction = 0.9

func engineKey(sub, n int) engine.Key {
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], uint64(n))
	return engine.ObjectKey("bench/io", uint32(sub), h[:], "")
}

func engineKeys(sub, first, n int) []engine.Key {
	ks := make([]engine.Key, n)
	for i := range ks {
		ks[i] = engineKey(sub, first+i)
	}
	return ks
}

// engineStats is what an engine run adds to its row's detail line.
type engineStats struct {
	st       engine.Stats
	failed   int64
	payload  int
	slots    int64
	holesGiB float64
}

func engineRun(c config, bs int, write bool) (result, engineStats, error) {
	var es engineStats
	uopt, err := uringOptions(c)
	if err != nil {
		return result{}, es, err
	}
	d, err := blockdev.OpenUring(c.file, uopt)
	if err != nil {
		return result{}, es, err
	}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = int64(bs)
	cfg.MetaTotalBytes = engine.MetaBytesFor(d.Info().Size, cfg.SlotBytes, cfg.BlockAlign, cfg.CheckpointFormat)
	cfg.DeallocateOnDelete = c.dealloc
	e, err := engine.Format(d, cfg)
	if err != nil {
		d.Close()
		return result{}, es, err
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	lay := e.Layout()
	es.payload, es.slots = int(lay.PayloadBytes()), lay.MaxSlots
	quota := int(float64(lay.MaxSlots)*fillFraction) / c.submitters / c.batch * c.batch
	if quota < c.batch {
		return result{}, es, fmt.Errorf("%s holds %d slots of %d bytes; need at least %d", c.file, lay.MaxSlots, bs, c.submitters*c.batch)
	}
	var (
		bytesDone atomic.Int64
		failed    atomic.Int64
		filled    sync.WaitGroup
		stop      atomic.Bool
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	payloads := make([][][]byte, c.submitters)
	for s := range payloads {
		payloads[s] = make([][]byte, c.batch)
		rng := rand.NewChaCha8([32]byte{byte(s), byte(bs >> 12)})
		for i := range payloads[s] {
			payloads[s][i] = make([]byte, es.payload)
			rng.Read(payloads[s][i])
		}
	}
	filled.Add(c.submitters)
	for s := 0; s < c.submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, oldest := 0, 0
			for next < quota && !stop.Load() { // fill
				res, err := e.PutMany(engineKeys(s, next, c.batch), payloads[s])
				if err != nil {
					fail(err)
				}
				next += c.batch
				failed.Add(int64(c.batch - len(res.Stored)))
			}
			filled.Done()
			if write {
				for !stop.Load() {
					e.DeleteMany(engineKeys(s, oldest, c.batch), false)
					oldest += c.batch
					res, err := e.PutMany(engineKeys(s, next, c.batch), payloads[s])
					if err != nil {
						fail(err)
						return
					}
					next += c.batch
					failed.Add(int64(c.batch - len(res.Stored)))
					bytesDone.Add(int64(len(res.Stored)) * int64(bs))
				}
				return
			}
			pool, err := blockdev.Alloc(c.batch * bs)
			if err != nil {
				fail(err)
				return
			}
			defer blockdev.Free(pool)
			bufs := make([][]byte, c.batch)
			for i := range bufs {
				bufs[i] = pool[i*bs : i*bs+es.payload]
			}
			rng := rand.New(rand.NewPCG(uint64(s), uint64(time.Now().UnixNano())))
			ks := make([]engine.Key, c.batch)
			filled.Wait() // every submitter's keys are stored
			for !stop.Load() {
				for i := range ks {
					ks[i] = engineKey(rng.IntN(c.submitters), rng.IntN(quota))
				}
				ok, err := e.LoadManyInto(ks, bufs)
				if err != nil {
					fail(err)
					return
				}
				n := 0
				for _, hit := range ok {
					if hit {
						n++
					}
				}
				failed.Add(int64(c.batch - n))
				bytesDone.Add(int64(n) * int64(es.payload))
			}
		}()
	}
	filled.Wait()
	time.Sleep(c.ramp)
	b0, t0, cpu0 := bytesDone.Load(), time.Now(), cpuSeconds()
	f0 := failed.Load()
	time.Sleep(c.runtime)
	b1, t1, cpu1 := bytesDone.Load(), time.Now(), cpuSeconds()
	es.failed = failed.Load() - f0
	stop.Store(true)
	wg.Wait()
	closed = true
	closeErr := e.Close() // drains the deallocate queue
	es.st = e.Stats()
	if firstErr == nil {
		firstErr = closeErr
	}
	if firstErr != nil {
		return result{}, es, firstErr
	}
	// Punched holes read as zeroes without I/O and are allocated again on write: fill them
	// so the next tool runs on the fully written file it would otherwise see.
	holes, err := fillHoles(c.file)
	if err != nil {
		return result{}, es, fmt.Errorf("refilling deallocated ranges: %w", err)
	}
	es.holesGiB = float64(holes) / (1 << 30)
	r := result{bw: float64(b1-b0) / t1.Sub(t0).Seconds()}
	if b1 > b0 {
		r.cpuPerGB = (cpu1 - cpu0) / (float64(b1-b0) / 1e9)
	}
	return r, es, nil
}

// fillHoles writes incompressible bytes over every hole of file (SEEK_HOLE/SEEK_DATA) with
// O_DIRECT and returns the bytes written; 1 MiB aligned chunks, holes are block aligned.
func fillHoles(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	buf, err := blockdev.Alloc(1 << 20)
	if err != nil {
		return 0, err
	}
	defer blockdev.Free(buf)
	rand.NewChaCha8([32]byte{'h', 'o', 'l', 'e'}).Read(buf)
	fd := int(f.Fd())
	var total int64
	for off := int64(0); off < size; {
		hole, err := unix.Seek(fd, off, unix.SEEK_HOLE)
		if err != nil || hole >= size {
			break
		}
		end, err := unix.Seek(fd, hole, unix.SEEK_DATA)
		if err != nil { // ENXIO: no data after the hole
			end = size
		}
		for p := hole; p < end; {
			n := min(int64(len(buf)), end-p)
			if _, err := unix.Pwrite(fd, buf[:n], p); err != nil {
				return total, fmt.Errorf("%s: write at %d: %w", path, p, err)
			}
			p += n
			total += n
		}
		off = end
	}
	return total, nil
}

// add accumulates one run's engine counters (summed) and failures (averaged over rounds).
func (es *engineStats) add(o engineStats, rounds int) {
	es.payload, es.slots = o.payload, o.slots
	es.failed += o.failed
	es.holesGiB += o.holesGiB / float64(rounds)
	es.st.Puts += o.st.Puts
	es.st.Loads += o.st.Loads
	es.st.Deletes += o.st.Deletes
	es.st.DeallocatedSlots += o.st.DeallocatedSlots
	es.st.DeallocateCalls += o.st.DeallocateCalls
	es.st.DeallocateRanges += o.st.DeallocateRanges
	es.st.DeallocatesCanceled += o.st.DeallocatesCanceled
	es.st.DeallocateErrors += o.st.DeallocateErrors
	es.st.ChecksumErrors += o.st.ChecksumErrors
	es.st.BufferPoolMisses += o.st.BufferPoolMisses
}

// detail is the engine counters' part of an engine row's detail line (summed over rounds).
func (es *engineStats) detail(write bool) string {
	s := fmt.Sprintf("slots %d, payload %d B; failed ops %d (measured)", es.slots, es.payload, es.failed)
	if write {
		s += fmt.Sprintf("; deallocated %d slots in %d calls (%d ranges), %d canceled by reuse, %d errors; %.2f GiB of holes refilled per run",
			es.st.DeallocatedSlots, es.st.DeallocateCalls, es.st.DeallocateRanges, es.st.DeallocatesCanceled, es.st.DeallocateErrors, es.holesGiB)
	} else {
		s += fmt.Sprintf("; checksum errors %d", es.st.ChecksumErrors)
	}
	return s + fmt.Sprintf("; staging-pool misses %d", es.st.BufferPoolMisses)
}
