package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rbctl/rbctl/blockdev"
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
// depth and buffer memory as the other fio jobs, with registered buffers.
func fioReplay(c config, bs int, log *writeLog) (result, error) {
	path, err := log.writeIolog(c.file, int64(replayBytesPerSec*(c.ramp+c.runtime).Seconds()), c.replayFlushes)
	if err != nil {
		return result{}, err
	}
	defer os.Remove(path)
	return fioRun(c, fioJob{bs: bs, write: true, fixed: true, iolog: path})
}
