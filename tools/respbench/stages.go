package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Where rbctl's GET time goes: the server's own counters (INFO: resp_get_*, and ring_* for
// devices with io_uring rings; docs/resp.md) and the kernel's block statistics of the disk
// under the cache file, read before and after each of rbctl's GET phases, and the client's
// own latencies, summed over a row's rounds.

// sample is what is read before and after a GET phase.
type sample struct {
	info map[string]int64 // INFO's integer fields, nil if INFO failed
	err  error            // why INFO failed
	disk blockStat        // zero if the file's disk has no statistics
}

// blockStat is a block device's read counters (/sys/dev/block/M:m/stat): completed reads,
// sectors read, and the milliseconds they spent in the device queue, summed over the reads.
type blockStat struct {
	ok                 bool
	reads, sectors, ms int64
}

// stages sums a row's GET phases of rbctl.
type stages struct {
	phases                           int
	clientN                          int64 // GETs the client timed
	clientNs                         int64 // their latencies, summed
	gets, getUs, writeUs             int64 // resp_get_timed, resp_get_us, resp_get_write_us
	ring                             bool  // ring_* counters were there
	batches, queuedUs, runUs, wakeUs int64
	disk                             bool // the disk's counters were there, every phase
	diskReads, diskSectors, diskMs   int64
	why                              error // why a phase was not counted (the first)
}

// add takes one phase: the samples around it and the client's latencies.
func (s *stages) add(a, b sample, lat []time.Duration) {
	if a.info == nil || b.info == nil {
		if s.why == nil {
			s.why = cmp.Or(a.err, b.err)
		}
		return
	}
	d := func(k string) (int64, bool) {
		x, ok1 := a.info[k]
		y, ok2 := b.info[k]
		return y - x, ok1 && ok2
	}
	n, ok := d("rbctl_resp_get_timed")
	if !ok {
		if s.why == nil {
			s.why = errors.New("the server's INFO has no rbctl_resp_get_timed (not rbctl serve, or a build before 2026-12-07)")
		}
		return
	}
	us, _ := d("rbctl_resp_get_us")
	wus, _ := d("rbctl_resp_get_write_us")
	first := s.phases == 0
	s.phases++
	s.gets, s.getUs, s.writeUs = s.gets+n, s.getUs+us, s.writeUs+wus
	for _, l := range lat {
		s.clientNs += int64(l)
	}
	s.clientN += int64(len(lat))
	bt, ok := d("rbctl_ring_batches")
	if first {
		s.ring = ok
	}
	if s.ring = s.ring && ok; s.ring {
		q, _ := d("rbctl_ring_queued_us")
		r, _ := d("rbctl_ring_run_us")
		w, _ := d("rbctl_ring_wake_us")
		s.batches, s.queuedUs, s.runUs, s.wakeUs = s.batches+bt, s.queuedUs+q, s.runUs+r, s.wakeUs+w
	}
	if first {
		s.disk = a.disk.ok && b.disk.ok
	}
	if s.disk = s.disk && a.disk.ok && b.disk.ok; s.disk {
		s.diskReads += b.disk.reads - a.disk.reads
		s.diskSectors += b.disk.sectors - a.disk.sectors
		s.diskMs += b.disk.ms - a.disk.ms
	}
}

// String is the row's line: means per GET of a found value (the server's, the client's) and
// per batch of device ops (the ring's), per read the disk completed (the kernel's); why not,
// when no phase could be counted.
func (s *stages) String() string {
	if s.phases == 0 || s.gets == 0 || s.clientN == 0 {
		if s.why != nil {
			return "not measured: " + s.why.Error()
		}
		return "not measured: no GET found a value"
	}
	per := func(us, n int64) float64 { return float64(us) / float64(n) }
	client := float64(s.clientNs) / float64(s.clientN) / 1e3
	server := per(s.getUs, s.gets)
	var b strings.Builder
	fmt.Fprintf(&b, "seen by the client %.0f µs; in the server %.0f µs (reply write %.0f)", client, server, per(s.writeUs, s.gets))
	if s.ring && s.batches > 0 {
		fmt.Fprintf(&b, "; per device batch (%d batches for %d GETs): queued (for the ring's thread; with aio, io_submit) %.0f, device and completion %.0f, caller's wake-up %.0f",
			s.batches, s.gets, per(s.queuedUs, s.batches), per(s.runUs, s.batches), per(s.wakeUs, s.batches))
	}
	if s.disk && s.diskReads > 0 {
		fmt.Fprintf(&b, "; the disk (kernel block statistics): %.0f µs per read of %.0f KiB (%d reads)",
			float64(s.diskMs)*1e3/float64(s.diskReads), float64(s.diskSectors)*512/1024/float64(s.diskReads), s.diskReads)
	} else {
		b.WriteString("; the disk's own time not measured")
	}
	fmt.Fprintf(&b, "; outside the server (network, client, requests behind others on their connection) %.0f µs", client-server)
	return b.String()
}

// direct estimates a GET's cycle (µs) for a server whose only time per GET is the disk's own
// time per read and the reply's write, with the time outside the server as measured: a
// model of the measured parts, for rows with one GET in flight per connection, where the
// cycle is the client's latency and the rate its inverse. ok is false without the disk's
// statistics or GET timings.
func (s *stages) direct() (cycle, measured float64, ok bool) {
	if s.phases == 0 || s.gets == 0 || s.clientN == 0 || !s.disk || s.diskReads == 0 {
		return 0, 0, false
	}
	measured = float64(s.clientNs) / float64(s.clientN) / 1e3
	outside := measured - float64(s.getUs)/float64(s.gets)
	cycle = outside + float64(s.diskMs)*1e3/float64(s.diskReads) + float64(s.writeUs)/float64(s.gets)
	return cycle, measured, cycle > 0
}

// takeSample reads the server's INFO and the disk's counters (file: the cache file, "" for
// none); either may be missing, and then the line says so.
func takeSample(ctx context.Context, addr, file string) sample {
	var s sample
	s.info, s.err = readInfo(ctx, addr)
	if file != "" {
		s.disk = readBlockStat(file)
	}
	return s
}

// readInfo asks addr for INFO and returns its integer fields.
func readInfo(ctx context.Context, addr string) (map[string]int64, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nINFO\r\n")); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("INFO answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return parseInfo(string(body)), nil
}

// parseInfo returns INFO's "name:integer" lines.
func parseInfo(body string) map[string]int64 {
	m := map[string]int64{}
	for _, l := range strings.Split(body, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if x, err := strconv.ParseInt(v, 10, 64); err == nil {
			m[k] = x
		}
	}
	return m
}

// readBlockStat reads the counters of the block device file lives on; not ok when it has
// none (tmpfs, overlay, a file that is gone).
func readBlockStat(file string) blockStat {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		return blockStat{}
	}
	dev := st.Dev
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		dev = st.Rdev // the cache is the device itself
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(dev), unix.Minor(dev)))
	if err != nil {
		return blockStat{}
	}
	return parseBlockStat(string(b))
}

// parseBlockStat reads the first four fields of a block device's stat file (Documentation/
// block/stat.rst): reads completed, reads merged, sectors read, milliseconds spent reading.
func parseBlockStat(s string) blockStat {
	f := strings.Fields(s)
	if len(f) < 4 {
		return blockStat{}
	}
	var v [4]int64
	for i := range v {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || x < 0 {
			return blockStat{}
		}
		v[i] = x
	}
	return blockStat{ok: true, reads: v[0], sectors: v[2], ms: v[3]}
}
