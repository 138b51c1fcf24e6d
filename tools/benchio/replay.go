package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// fio-replay: the engine-put row's like-for-like reference. An LRU cache at its high-water
// mark frees its oldest keys and reuses their slots, so the engine writes slots in nearly
// sequential runs that the block layer merges (on this machine's disk 1.8–2.2 requests per
// MiB at 64 KiB, against 16 for fio's random 64 KiB writes; 0.30 against 1.00 at 1 MiB).
// fio's randwrite job therefore does more disk work per byte than the engine. fio-replay
// makes fio write exactly what the engine wrote: benchio records the offset and length of
// every write the engine submitted in its last measured window and fio replays them
// (--read_iolog, --replay_no_stall) at the same queue depth.

// maxLogged caps a write log (enough for several seconds at 64 KiB).
const maxLogged = 1 << 20

// writeLog collects the engine's writes while on is set, and its flushes (checkpoints make
// their writes durable with one) as entries of length flushMark.
type writeLog struct {
	on   atomic.Bool
	mu   sync.Mutex
	offs []int64
	lens []int
}

// flushMark is the length of a logged flush.
const flushMark = -1

// addFlush logs a flush, replayed as a datasync with -replay-flushes.
func (l *writeLog) addFlush() {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.offs) < maxLogged {
		l.offs = append(l.offs, 0)
		l.lens = append(l.lens, flushMark)
	}
}

// flushes is how many flushes the log holds.
func (l *writeLog) flushes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.lens {
		if x == flushMark {
			n++
		}
	}
	return n
}

func (l *writeLog) add(ops []blockdev.Op) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ops {
		if ops[i].Write && len(l.offs) < maxLogged {
			l.offs = append(l.offs, ops[i].Off)
			l.lens = append(l.lens, ops[i].Len())
		}
	}
}

// replayBytesPerSec is the fastest write rate a replay has to last for: the log is repeated
// until it holds (ramp + runtime) of writes at this rate, since fio does not loop a replayed
// log within one run (--loops and --time_based were tried: a 125 MiB log ran out after
// 0.1–0.2 s). If it still runs out, the run's disk "bytes" figure falls below 1.
const replayBytesPerSec = 8e9

// writeIolog writes the log as a fio version 2 iolog replaying the writes on file, repeated
// to hold at least want bytes; with flushes, each logged flush in its place as a datasync.
func (l *writeLog) writeIolog(file string, want int64, flushes bool) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var logged int64
	for _, n := range l.lens {
		logged += int64(max(n, 0))
	}
	if logged == 0 {
		return "", fmt.Errorf("no engine writes recorded to replay")
	}
	reps := int(min((want+logged-1)/logged, 1000))
	f, err := os.CreateTemp("", "benchio-*.iolog")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "fio version 2 iolog\n%s add\n%s open\n", file, file)
	for range max(reps, 1) {
		for i, off := range l.offs {
			switch {
			case l.lens[i] != flushMark:
				fmt.Fprintf(w, "%s write %d %d\n", file, off, l.lens[i])
			case flushes:
				fmt.Fprintf(w, "%s datasync 0 0\n", file)
			}
		}
	}
	fmt.Fprintf(w, "%s close\n", file)
	if err := w.Flush(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}

// benchDevice is the device the engine runs on: the io_uring device, optionally without
// vectored writes (-engine-vectored=false: the engine copies every payload behind its
// header), recording writes into log when it is set.
type benchDevice struct {
	*blockdev.UringDevice
	copying bool
	log     *writeLog
}

func (d benchDevice) VectoredWrites() bool { return !d.copying }

func (d benchDevice) Submit(ops []blockdev.Op) error { return d.Start(ops).Wait() }

// Start records the writes too: the engine starts its writes chunk by chunk (blockdev.Starter).
func (d benchDevice) Start(ops []blockdev.Op) blockdev.Started {
	if d.log != nil {
		d.log.add(ops)
	}
	return d.UringDevice.Start(ops)
}

// Flush records the flush too: the engine's checkpoints end with one.
func (d benchDevice) Flush() error {
	if d.log != nil {
		d.log.addFlush()
	}
	return d.UringDevice.Flush()
}

// fioReplay runs fio over the engine's recorded writes: io_uring, O_DIRECT, the same queue
// depth and buffer memory as the other fio jobs. With registered buffers (--fixedbufs)
// unless it replays flushes: fio 3.33's io_uring engine with --fixedbufs submits no FSYNC
// for an iolog's datasync lines (0 FSYNC SQEs at the io_uring_submit_req tracepoint, 0
// flushes on the disk; without it 10 of 10), so with them that replay would write without
// ever flushing. With flushes, the run fails unless the disk counted at least one flush
// while fio ran (the window's own count may miss them: fio parses the log first).
func fioReplay(c config, bs int, log *writeLog) (result, error) {
	path, err := log.writeIolog(c.file, int64(replayBytesPerSec*(c.ramp+c.runtime).Seconds()), c.replayFlushes)
	if err != nil {
		return result{}, err
	}
	defer os.Remove(path)
	flushes := c.replayFlushes && log.flushes() > 0
	statPath := diskStatPath(c.file)
	d0, ok0 := readDiskStat(statPath)
	r, err := fioRun(c, fioJob{bs: bs, write: true, fixed: !flushes, iolog: path})
	d1, ok1 := readDiskStat(statPath)
	if err == nil && flushes && ok0 && ok1 && d1.flushIOs == d0.flushIOs {
		return result{}, fmt.Errorf("fio replayed a log with %d flushes and the disk received none", log.flushes())
	}
	return r, err
}

// snapshot copies the log's entries.
func (l *writeLog) snapshot() (offs []int64, lens []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.offs), slices.Clone(l.lens)
}

// rbctlReplay is rbctl-replay: rbctl's own device path (the io_uring device as the rbctl
// row opens it, the same ring setup, depth and registered pool) writing the engine's
// recorded offsets and lengths in their order, each of -submitters goroutines taking the
// log's next -batch entries (as the engine's PutMany calls, so that the ring stays as full),
// the log repeated for as long as the run lasts; with
// -replay-flushes, each logged flush is a Flush in its place (the writes before it in that
// submitter's chunk submitted first). Between the engine and fio-replay it splits a gap in
// two: the engine ÷ rbctl-replay is what the engine does beyond its I/O, rbctl-replay ÷
// fio-replay what rbctl's ring path costs for the same I/O.
func rbctlReplay(c config, log *writeLog) (result, error) {
	offs, lens := log.snapshot()
	maxLen := 0
	for _, n := range lens {
		maxLen = max(maxLen, n)
	}
	if maxLen == 0 {
		return result{}, fmt.Errorf("no engine writes recorded to replay")
	}
	uopt, err := uringOptions(c)
	if err != nil {
		return result{}, err
	}
	d, err := blockdev.OpenUring(c.file, uopt)
	if err != nil {
		return result{}, err
	}
	defer d.Close()
	batch := c.batch
	pool, err := blockdev.Alloc(c.submitters * batch * maxLen)
	if err != nil {
		return result{}, err
	}
	defer blockdev.Free(pool)
	smallPages(c, pool)
	if c.fixed {
		if err := d.RegisterBuffers([][]byte{pool}); err != nil {
			return result{}, err
		}
	}
	rand.NewChaCha8([32]byte{'r', 'e', 'p', 'l', 'a', 'y'}).Read(pool) // incompressible, as the engine's payloads
	var (
		next      atomic.Int64 // the log entry the next chunk starts at (modulo its length)
		bytesDone atomic.Int64
		stop      atomic.Bool
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	for s := 0; s < c.submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := pool[s*batch*maxLen : (s+1)*batch*maxLen]
			ops := make([]blockdev.Op, 0, batch)
			submit := func() bool {
				if len(ops) == 0 {
					return true
				}
				if err := d.Submit(ops); err != nil {
					fail(err)
					return false
				}
				var n int64
				for i := range ops {
					n += int64(ops[i].N)
				}
				bytesDone.Add(n)
				ops = ops[:0]
				return true
			}
			for !stop.Load() {
				first := next.Add(int64(batch)) - int64(batch)
				for i := range batch {
					k := int((first + int64(i)) % int64(len(offs)))
					if lens[k] == flushMark {
						if !c.replayFlushes {
							continue
						}
						if !submit() {
							return
						}
						if err := d.Flush(); err != nil {
							fail(err)
							return
						}
						continue
					}
					ops = append(ops, blockdev.Op{Write: true, Off: offs[k], Buf: mine[len(ops)*maxLen : len(ops)*maxLen+lens[k]], Handle: placement.None})
				}
				if !submit() {
					return
				}
			}
		}()
	}
	statPath := diskStatPath(c.file)
	time.Sleep(c.ramp)
	b0, t0, cpu0, o0 := bytesDone.Load(), time.Now(), cpuSeconds(), d.Occupancy()
	d0, ok0 := readDiskStat(statPath)
	time.Sleep(c.runtime)
	d1, ok1 := readDiskStat(statPath)
	b1, t1, cpu1, o1 := bytesDone.Load(), time.Now(), cpuSeconds(), d.Occupancy()
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	r := result{bw: float64(b1-b0) / t1.Sub(t0).Seconds(), depth: meanDepth(o0, o1)}
	if ok0 && ok1 {
		r.disk = diffDisk(d0, d1, true, b1-b0)
	}
	if b1 > b0 {
		r.cpuPerGB = (cpu1 - cpu0) / (float64(b1-b0) / 1e9)
	}
	return r, nil
}
