package main

import (
	"cmp"
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
	"github.com/rbctl/rbctl/p2p/node"
)

// The engine rows: engine.PutMany and engine.LoadManyInto on the same file and ring setup
// as the device row, slot_bytes = the block size, DeallocateOnDelete where -engine-deallocate
// says: by default where rbctl serve deallocates (a device that takes discards, never a
// regular file, whose deallocates are punched holes: docs/io_uring.md, "engine-put 64 KiB
// after every freed slot is discarded").
//
// engine-put: each submitter owns a FIFO of its keys; once the cache is filled to
// fillFraction, every PutMany of batch keys is preceded by a DeleteMany of its batch oldest
// keys (the eviction an LRU cache does when full), so every freed slot goes through the
// deallocator. engine-get: the cache is formatted and filled once per case (prepareLoads),
// then each round opens it and each submitter loads batch random live keys per
// LoadManyInto into aligned buffers. Bytes are device bytes: a put
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
	// SQEs of the whole run (fill included) that used a registered buffer, and that did not.
	fixedOps, plainOps, vectoredOps int64
	dealloc                         string // whether freed slots were deallocated, and why
	ring                            bool   // the device issues SQEs (false: native AIO)
}

// deallocWhy says whether the engine rows deallocate on d, and why.
func deallocWhy(c config, d blockdev.Device) string {
	info := d.Info()
	switch {
	case c.dealloc.On(info):
		return fmt.Sprintf("on (-engine-deallocate %s)", cmp.Or(string(c.dealloc), "none"))
	case c.dealloc == node.DeallocateNone:
		return "off (-engine-deallocate none)"
	case info.Kind == blockdev.KindFile:
		return "off (a regular file; -engine-deallocate all punches holes)"
	}
	return "off (the device takes no discards)"
}

// engineCfg is the engine configuration of a row: defaults, slot_bytes = bs, the metadata
// region sized for the device.
func engineCfg(c config, d blockdev.Device, bs int) engine.Config {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = int64(bs)
	cfg.MetaTotalBytes = engine.MetaBytesFor(d.Info().Size, cfg.SlotBytes, cfg.BlockAlign, cfg.CheckpointFormat)
	cfg.DeallocateOnDelete = c.dealloc.On(d.Info())
	cfg.PayloadChecksum = cfg.PayloadChecksum && c.checksum
	return cfg
}

// engineQuota is how many keys each submitter stores: its share of fillFraction of the slots,
// in whole batches.
func engineQuota(c config, lay engine.Layout, bs int) (int, error) {
	quota := int(float64(lay.MaxSlots)*fillFraction) / c.submitters / c.batch * c.batch
	if quota < c.batch {
		return 0, fmt.Errorf("%s holds %d slots of %d bytes; need at least %d", c.file, lay.MaxSlots, bs, c.submitters*c.batch)
	}
	return quota, nil
}

// submitterPayloads are the incompressible payloads submitter s puts, one per batch
// position, in one aligned buffer outside the Go heap (as a caller's pinned staging pool
// is): PutMany writes them without copying (engine "zero-copy puts") unless -engine-vectored
// is off. free releases the buffer once the engine has closed.
func submitterPayloads(c config, s, payload, bs int) (out [][]byte, free func(), err error) {
	// In whole huge pages, as Alloc maps every buffer of 2 MiB or more (64 payloads of 60 KiB
	// once had their last 1.75 MiB in 4 KiB pages, whose writes went to the disk as 15
	// segments each where fio-replay's and rbctl-replay's went as one).
	mem, err := blockdev.Alloc(c.batch * payload)
	if err != nil {
		return nil, nil, err
	}
	smallPages(c, mem)
	out = make([][]byte, c.batch)
	rng := rand.NewChaCha8([32]byte{byte(s), byte(bs >> 12)})
	for i := range out {
		out[i] = mem[i*payload : (i+1)*payload : (i+1)*payload]
		rng.Read(out[i])
	}
	return out, func() { blockdev.Free(mem) }, nil
}

// engineDevice is what the engine runs on: d, without vectored writes under
// -engine-vectored=false (the engine copies every payload behind its header, as it did before
// zero-copy puts), recording its writes into log when log is not nil (replay.go).
func engineDevice(c config, d rbDev, log *writeLog) blockdev.Device {
	if c.vectored && log == nil {
		return d
	}
	return benchDevice{rbDev: d, copying: !c.vectored, log: log}
}

// fillEngine stores every submitter's first quota keys, the submitters running concurrently
// and stopping at st's first error (which fails st). It returns the puts that were not stored.
func fillEngine(c config, e *engine.Engine, quota, payload, bs int, st *runState) (int64, error) {
	var (
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	for s := 0; s < c.submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payloads, free, err := submitterPayloads(c, s, payload, bs)
			if err != nil {
				st.fail(err)
				return
			}
			defer free()
			for next := 0; next < quota && !st.stop.Load(); next += c.batch {
				res, err := e.PutMany(engineKeys(s, next, c.batch), payloads)
				if err != nil {
					st.fail(err)
					return
				}
				failed.Add(int64(c.batch - len(res.Stored)))
			}
		}()
	}
	wg.Wait()
	return failed.Load(), st.err
}

// prepareLoads formats the file as a cache and fills it for a case's engine-get rounds,
// which then only open it: the reads of the other tools leave it intact, and no round
// measures right after writing 90 % of the file.
func prepareLoads(c config, bs int) error {
	d, err := openDev(c)
	if err != nil {
		return err
	}
	e, err := engine.Format(engineDevice(c, d, nil), engineCfg(c, d, bs))
	if err != nil {
		d.Close()
		return err
	}
	lay := e.Layout()
	quota, err := engineQuota(c, lay, bs)
	if err == nil {
		var st runState
		var failed int64
		failed, err = fillEngine(c, e, quota, int(lay.PayloadBytes()), bs, &st)
		if err == nil && failed > 0 {
			err = fmt.Errorf("filling the cache: %d puts not stored", failed)
		}
	}
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	return err
}

// engineRun measures one engine round. A put round formats and fills the file first (the
// other tools' writes overwrite it between rounds); a load round opens the cache
// prepareLoads made.
// With log not nil, the writes of the measured window are recorded into it (replacing what it held).
func engineRun(c config, bs int, write bool, log *writeLog) (result, engineStats, error) {
	var es engineStats
	d, err := openDev(c)
	if err != nil {
		return result{}, es, err
	}
	es.ring = isRing(d)
	cfg := engineCfg(c, d, bs)
	es.dealloc = deallocWhy(c, d)
	open := engine.Open
	if write {
		open = engine.Format
	}
	e, err := open(engineDevice(c, d, log), cfg)
	if err != nil {
		d.Close()
		return result{}, es, err
	}
	closed := false
	var pools [][]byte // load buffers, freed once the engine (and its rings) are closed
	var frees []func() // put payloads, likewise
	defer func() {
		if !closed {
			e.Close()
		}
		for _, p := range pools {
			blockdev.Free(p)
		}
		for _, f := range frees {
			f()
		}
	}()
	lay := e.Layout()
	es.payload, es.slots = int(lay.PayloadBytes()), lay.MaxSlots
	quota, err := engineQuota(c, lay, bs)
	if err != nil {
		return result{}, es, err
	}
	var (
		st     runState
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	if write {
		if _, err := fillEngine(c, e, quota, es.payload, bs, &st); err != nil {
			return result{}, es, err
		}
		if c.settle { // the fill's write-back is setup: the window's checkpoints must not pay for it
			if err := settle(c.file); err != nil {
				return result{}, es, err
			}
		}
	} else if n := e.Usage().SlotsUsed; n < int64(c.submitters*quota) {
		return result{}, es, fmt.Errorf("the cache holds %d keys, want %d (prepareLoads did not run?)", n, c.submitters*quota)
	}
	// Load buffers: one aligned pool per submitter, allocated outside the Go heap and
	// registered with the engine (RegisterMemory) as a caller with a pinned buffer pool
	// (LMCache's) would, unless -engine-register=false.
	if !write {
		for range c.submitters {
			p, err := blockdev.Alloc(c.batch * bs)
			if err != nil {
				return result{}, es, err
			}
			smallPages(c, p)
			pools = append(pools, p)
		}
		if c.register {
			if err := e.RegisterMemory(pools); err != nil {
				return result{}, es, err
			}
		}
	}
	// Put payloads: one aligned pool per submitter (submitterPayloads), allocated before the
	// submitters start and freed after Close. They are not registered: a put is one WRITEV,
	// which takes no registered buffers (two WRITE_FIXED per put were tried and lost:
	// docs/io_uring.md, "Equal work").
	var putPayloads [][][]byte
	if write {
		for s := range c.submitters {
			p, free, err := submitterPayloads(c, s, es.payload, bs)
			if err != nil {
				return result{}, es, err
			}
			frees = append(frees, free)
			putPayloads = append(putPayloads, p)
		}
	}
	time.Sleep(c.lead) // the same idle before the first I/O as every tool (-lead)
	for s := 0; s < c.submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if write {
				payloads := putPayloads[s]
				next, oldest := quota, 0
				for !st.stop.Load() {
					e.DeleteMany(engineKeys(s, oldest, c.batch), false)
					oldest += c.batch
					res, err := e.PutMany(engineKeys(s, next, c.batch), payloads)
					if err != nil {
						st.fail(err)
						return
					}
					next += c.batch
					failed.Add(int64(c.batch - len(res.Stored)))
					st.bytes.Add(int64(len(res.Stored)) * int64(bs))
				}
				return
			}
			pool := pools[s]
			bufs := make([][]byte, c.batch)
			for i := range bufs {
				bufs[i] = pool[i*bs : i*bs+es.payload]
			}
			rng := rand.New(rand.NewPCG(uint64(s), uint64(time.Now().UnixNano())))
			ks := make([]engine.Key, c.batch)
			for !st.stop.Load() {
				for i := range ks {
					ks[i] = engineKey(rng.IntN(c.submitters), rng.IntN(quota))
				}
				ok, err := e.LoadManyInto(ks, bufs)
				if err != nil {
					st.fail(err)
					return
				}
				n := 0
				for _, hit := range ok {
					if hit {
						n++
					}
				}
				failed.Add(int64(c.batch - n))
				st.bytes.Add(int64(n) * int64(es.payload))
			}
		}()
	}
	var f0 int64
	w := measure(c, &st, d.Occupancy, func(on bool) {
		if on {
			f0 = failed.Load()
		} else {
			es.failed = failed.Load() - f0
		}
		if log != nil {
			if on {
				log.reset()
			}
			log.on.Store(on)
		}
	})
	wg.Wait()
	closed = true
	closeErr := e.Close() // drains the deallocate queue
	es.st = e.Stats()
	us := d.Stats()
	es.fixedOps, es.plainOps, es.vectoredOps = us.FixedOps, us.PlainOps, us.VectoredOps
	if err := cmp.Or(st.err, closeErr); err != nil {
		return result{}, es, err
	}
	if write {
		// Punched holes read as zeroes without I/O and are allocated again on write: fill
		// them so the next tool runs on the fully written file it would otherwise see.
		holes, err := fillHoles(c.file)
		if err != nil {
			return result{}, es, fmt.Errorf("refilling deallocated ranges: %w", err)
		}
		es.holesGiB = float64(holes) / (1 << 30)
	}
	return w.result(write), es, nil
}

// settle flushes the file (fdatasync: on a file or a block device with a volatile write cache,
// a flush reaches the disk). On a disk whose flush writes back what its host cached (a VM's
// image file), the next flush costs in proportion to what was written since the last: a
// run's first checkpoint after the engine's fill of 90 % of the file took over a second
// (docs/io_uring.md, "engine-put 64 KiB"). Settling before every run (and after the fill)
// starts every measured window from the same state.
func settle(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = unix.Fdatasync(int(f.Fd()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
	es.payload, es.slots, es.dealloc, es.ring = o.payload, o.slots, o.dealloc, o.ring
	es.failed += o.failed
	es.holesGiB += o.holesGiB / float64(rounds)
	es.st.Puts += o.st.Puts
	es.st.PutsVectored += o.st.PutsVectored
	es.st.Loads += o.st.Loads
	es.st.Deletes += o.st.Deletes
	es.st.DeallocatedSlots += o.st.DeallocatedSlots
	es.st.DeallocateCalls += o.st.DeallocateCalls
	es.st.DeallocateRanges += o.st.DeallocateRanges
	es.st.DeallocateErrors += o.st.DeallocateErrors
	es.st.ChecksumErrors += o.st.ChecksumErrors
	es.st.BufferPoolMisses += o.st.BufferPoolMisses
	es.fixedOps += o.fixedOps
	es.plainOps += o.plainOps
	es.vectoredOps += o.vectoredOps
}

// detail is the engine counters' part of an engine row's detail line (summed over rounds).
func (es *engineStats) detail(write, registered bool) string {
	s := fmt.Sprintf("slots %d, payload %d B; failed ops %d (measured)", es.slots, es.payload, es.failed)
	if write {
		s += fmt.Sprintf("; puts %d, written without a copy (vectored) %d", es.st.Puts, es.st.PutsVectored)
		s += fmt.Sprintf("; deallocation %s: deallocated %d slots in %d calls (%d ranges), %d errors; %.2f GiB of holes refilled per run",
			es.dealloc, es.st.DeallocatedSlots, es.st.DeallocateCalls, es.st.DeallocateRanges, es.st.DeallocateErrors, es.holesGiB)
	} else {
		s += fmt.Sprintf("; checksum errors %d; load buffers registered (RegisterMemory): %v", es.st.ChecksumErrors, registered)
	}
	if !es.ring {
		return s + fmt.Sprintf("; staging-pool misses %d; SQEs: none (native AIO)", es.st.BufferPoolMisses)
	}
	return s + fmt.Sprintf("; staging-pool misses %d; SQEs fixed %d, plain %d, vectored (WRITEV) %d", es.st.BufferPoolMisses, es.fixedOps, es.plainOps, es.vectoredOps)
}
