package main

import (
	"bufio"
	"fmt"
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

// writeLog collects, while on is set, the engine's writes, its flushes (checkpoints make
// their writes durable with them) and its deallocations (DeallocateOnDelete), in order.
type writeLog struct {
	on      atomic.Bool
	mu      sync.Mutex
	entries []logEntry
}

// logEntry is one recorded operation: a write of n bytes at off, a flush, or the
// deallocation of n bytes at off.
type logEntry struct {
	off  int64
	n    int
	kind entryKind
}

type entryKind uint8

const (
	logWrite entryKind = iota
	logFlush
	logDealloc
)

func (l *writeLog) record(e ...logEntry) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range e {
		if len(l.entries) < maxLogged {
			l.entries = append(l.entries, x)
		}
	}
}

// reset empties the log (a new measured window starts).
func (l *writeLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = l.entries[:0]
}

// addFlush logs a flush, replayed as a datasync (fio) or a Flush (rbctl) with -replay-flushes.
func (l *writeLog) addFlush() { l.record(logEntry{kind: logFlush}) }

// addDealloc logs a deallocation, replayed by rbctl-replay (fio cannot trim a file).
func (l *writeLog) addDealloc(ranges []blockdev.Range) {
	for _, r := range ranges {
		l.record(logEntry{off: r.Off, n: int(r.Len), kind: logDealloc})
	}
}

// count is how many entries of kind k the log holds.
func (l *writeLog) count(k entryKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.kind == k {
			n++
		}
	}
	return n
}

func (l *writeLog) flushes() int  { return l.count(logFlush) }
func (l *writeLog) deallocs() int { return l.count(logDealloc) }

func (l *writeLog) add(ops []blockdev.Op) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ops {
		if ops[i].Write && len(l.entries) < maxLogged {
			l.entries = append(l.entries, logEntry{off: ops[i].Off, n: ops[i].Len()})
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
// Deallocations are left out: fio-3.33 refuses a "trim" line on a regular file ("bad ddir").
// A write longer than piece (a checkpoint's, longer than the row's block size) is replayed
// as piece-sized writes at its consecutive offsets, so fio's buffers stay iodepth × piece
// (what bench-io.sh reserves huge pages for; fio sizes them by the log's longest write).
func (l *writeLog) writeIolog(file string, piece int, want int64, flushes bool) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var logged int64
	for _, e := range l.entries {
		if e.kind == logWrite {
			logged += int64(e.n)
		}
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
		for _, e := range l.entries {
			switch {
			case e.kind == logWrite:
				for o := 0; o < e.n; o += piece {
					fmt.Fprintf(w, "%s write %d %d\n", file, e.off+int64(o), min(piece, e.n-o))
				}
			case e.kind == logFlush && flushes:
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
	rbDev
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
	return d.rbDev.Start(ops)
}

// Deallocate records the deallocation too (DeallocateOnDelete).
func (d benchDevice) Deallocate(ranges []blockdev.Range) error {
	if d.log != nil {
		d.log.addDealloc(ranges)
	}
	return d.rbDev.Deallocate(ranges)
}

// Flush records the flush too: the engine's checkpoints end with one.
func (d benchDevice) Flush() error {
	if d.log != nil {
		d.log.addFlush()
	}
	return d.rbDev.Flush()
}

// fioReplay runs fio over the engine's recorded writes: io_uring, O_DIRECT, the same queue
// depth and buffer memory as the other fio jobs. With registered buffers (--fixedbufs)
// unless it replays flushes: fio 3.33's io_uring engine with --fixedbufs submits no FSYNC
// for an iolog's datasync lines (0 FSYNC SQEs at the io_uring_submit_req tracepoint, 0
// flushes on the disk; without it 10 of 10), so with them that replay would write without
// ever flushing. With flushes, the run fails unless the disk counted at least one flush
// while fio ran (the window's own count may miss them: fio parses the log first).
func fioReplay(c config, bs int, log *writeLog) (result, error) {
	path, err := log.writeIolog(c.file, bs, int64(replayBytesPerSec*(c.ramp+c.runtime).Seconds()), c.replayFlushes)
	if err != nil {
		return result{}, err
	}
	defer os.Remove(path)
	flushes := c.replayFlushes && log.flushes() > 0
	statPath := diskStatPath(c.file)
	d0, ok0 := readDiskStat(statPath)
	r, err := fioRun(c, fioJob{bs: bs, write: true, fixed: !flushes && c.fioEngine == "io_uring", iolog: path})
	d1, ok1 := readDiskStat(statPath)
	if err == nil && flushes && ok0 && ok1 && d1.flushIOs == d0.flushIOs {
		return result{}, fmt.Errorf("fio replayed a log with %d flushes and the disk received none", log.flushes())
	}
	return r, err
}

// snapshot copies the log's entries.
func (l *writeLog) snapshot() []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// split cuts every write longer than piece into piece-sized writes at consecutive offsets,
// as writeIolog does for fio.
func split(log []logEntry, piece int) []logEntry {
	out := make([]logEntry, 0, len(log))
	for _, e := range log {
		if e.kind != logWrite || e.n <= piece {
			out = append(out, e)
			continue
		}
		for o := 0; o < e.n; o += piece {
			out = append(out, logEntry{off: e.off + int64(o), n: min(piece, e.n-o)})
		}
	}
	return out
}

// rbctlReplay is rbctl-replay: rbctl's own device path (the io_uring device as the rbctl
// row opens it, the same ring setup, depth and registered pool) writing the engine's
// recorded offsets and lengths in their order, each of -submitters goroutines taking the
// log's next -batch entries (as the engine's PutMany calls, so that the ring stays as full),
// the log repeated for as long as the run lasts, writes longer than bs cut as fio-replay's; with
// -replay-flushes, each logged flush is a Flush in its place; each logged deallocation
// (DeallocateOnDelete) is handed, once the writes before it in that submitter's chunk are
// done, to one goroutine that runs them in order beside the writes, as the engine's
// deallocator does. Between the engine and fio-replay it splits a gap in
// two: the engine ÷ rbctl-replay is what the engine does beyond its I/O, rbctl-replay ÷
// fio-replay what rbctl's ring path costs for the same I/O.
func rbctlReplay(c config, bs int, log *writeLog) (result, error) {
	log0 := split(log.snapshot(), bs)
	maxLen := 0
	for _, e := range log0 {
		if e.kind == logWrite {
			maxLen = max(maxLen, e.n)
		}
	}
	if maxLen == 0 {
		return result{}, fmt.Errorf("no engine writes recorded to replay")
	}
	batch := c.batch
	d, pool, closePool, err := openPool(c, c.submitters*batch*maxLen, [32]byte{'r', 'e', 'p', 'l', 'a', 'y'})
	if err != nil {
		return result{}, err
	}
	defer closePool()
	var (
		st   runState
		next atomic.Int64 // the log entry the next chunk starts at (modulo its length)
		wg   sync.WaitGroup
	)
	// Deallocations run on their own goroutine, one at a time in logged order, as the
	// engine's deallocator runs them beside its puts.
	deallocs := make(chan blockdev.Range, 1024)
	deallocDone := make(chan struct{})
	go func() {
		defer close(deallocDone)
		for r := range deallocs {
			if st.stop.Load() {
				continue // the run is over or failed: drain without issuing
			}
			if err := d.Deallocate([]blockdev.Range{r}); err != nil {
				st.fail(err)
			}
		}
	}()
	time.Sleep(c.lead) // the same idle before the first I/O as every tool (-lead)
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
					st.fail(err)
					return false
				}
				var n int64
				for i := range ops {
					n += int64(ops[i].N)
				}
				st.bytes.Add(n)
				ops = ops[:0]
				return true
			}
			for !st.stop.Load() {
				first := next.Add(int64(batch)) - int64(batch)
				for i := range batch {
					e := log0[int((first+int64(i))%int64(len(log0)))]
					switch e.kind {
					case logWrite:
						ops = append(ops, blockdev.Op{Write: true, Off: e.off, Buf: mine[len(ops)*maxLen : len(ops)*maxLen+e.n], Handle: placement.None})
					case logDealloc:
						if !submit() { // the writes before it first
							return
						}
						deallocs <- blockdev.Range{Off: e.off, Len: int64(e.n)}
					case logFlush:
						if !c.replayFlushes {
							continue
						}
						if !submit() {
							return
						}
						if err := d.Flush(); err != nil {
							st.fail(err)
							return
						}
					}
				}
				if !submit() {
					return
				}
			}
		}()
	}
	w := measure(c, &st, d.Occupancy, nil)
	wg.Wait()
	close(deallocs)
	<-deallocDone
	if st.err != nil {
		return result{}, st.err
	}
	if log.deallocs() > 0 { // as after an engine round: the next tool runs on a written file
		if _, err := fillHoles(c.file); err != nil {
			return result{}, fmt.Errorf("refilling deallocated ranges: %w", err)
		}
	}
	return w.result(true), nil
}
