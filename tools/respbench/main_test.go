package main

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// fio's JSON (trimmed from fio-3.33), after a note fio printed first.
func TestFioReadGBps(t *testing.T) {
	out := []byte(`note: both iodepth >= 1 and synchronous I/O engine are selected
{"fio version": "fio-3.33", "jobs": [{"jobname": "disk", "read": {"io_bytes": 268435456, "bw_bytes": 1855000000, "iops": 7076.3}}]}`)
	got, err := fioReadGBps(out)
	if err != nil || math.Abs(got-1.855) > 1e-9 {
		t.Fatalf("got %v, %v; want 1.855", got, err)
	}
	if _, err := fioReadGBps([]byte(`{"jobs": [{"read": {"bw_bytes": 0}}]}`)); err == nil {
		t.Error("a zero read rate was taken")
	}
	if _, err := fioReadGBps([]byte(`fio: failed`)); err == nil {
		t.Error("output without JSON was taken")
	}
}

// A write run's rate is its "write" object's; its zero "read" is not taken for it, nor the
// other way round.
func TestFioWriteGBps(t *testing.T) {
	out := []byte(`{"jobs": [{"jobname": "disk", "read": {"bw_bytes": 0}, "write": {"io_bytes": 268435456, "bw_bytes": 912000000}}]}`)
	got, err := fioGBps(out, "write")
	if err != nil || math.Abs(got-0.912) > 1e-9 {
		t.Fatalf("got %v, %v; want 0.912", got, err)
	}
	if _, err := fioReadGBps(out); err == nil {
		t.Error("a write run's zero read rate was taken")
	}
}

func TestReadThenSend(t *testing.T) {
	for _, c := range []struct{ disk, ref, want float64 }{
		{2, 2, 1},        // equal times per GET: half of either
		{1.4, 2, 0.8235}, // the disk at 0.7 of valkey
		{0, 2, 0},
		{2, 0, 0},
	} {
		if got := readThenSend(c.disk, c.ref); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("readThenSend(%v, %v) = %v, want %v", c.disk, c.ref, got, c.want)
		}
	}
}

// The scratch file fio writes must exist and must not be the cache file, by any name.
func TestCheckScratch(t *testing.T) {
	dir := t.TempDir()
	cache, scratch, link := dir+"/cache.img", dir+"/scratch.img", dir+"/link.img"
	for _, f := range []string{cache, scratch} {
		if err := os.WriteFile(f, make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(cache, link); err != nil {
		t.Fatal(err)
	}
	if err := checkScratch(scratch, cache); err != nil {
		t.Fatalf("a scratch file beside the cache: %v", err)
	}
	if err := checkScratch(scratch, ""); err != nil {
		t.Fatalf("a scratch file without -disk-file: %v", err)
	}
	for _, bad := range []string{cache, link, dir + "/missing.img"} {
		if err := checkScratch(bad, cache); err == nil {
			t.Errorf("checkScratch(%s) took it", bad)
		}
	}
}

// The breakdown line is built from the differences of INFO's counters and the disk's
// statistics around each GET phase, per GET, per batch and per disk read; a phase whose INFO
// lacks the ring counters, or a disk without statistics, makes the line say "not measured"
// rather than print a zero.
func TestStages(t *testing.T) {
	info := parseInfo("# Stats\r\ntotal_commands_processed:7\r\nrbctl_resp_get_timed:10\r\nrbctl_resp_get_us:5000\r\nrbctl_resp_get_write_us:800\r\n" +
		"rbctl_ring_batches:10\r\nrbctl_ring_queued_us:1000\r\nrbctl_ring_run_us:2500\r\nrbctl_ring_wake_us:700\r\nrbctl_node:t\r\n")
	if len(info) != 8 || info["rbctl_ring_run_us"] != 2500 {
		t.Fatalf("parseInfo = %v", info)
	}
	zero := map[string]int64{}
	for k := range info {
		zero[k] = 0
	}
	d0 := parseBlockStat("  100 0 2000 50 0 0 0 0 0 0 0\n")
	d1 := parseBlockStat("  110 0 7120 54 0 0 0 0 0 0 0\n")
	if !d0.ok || d1.reads != 110 || d1.sectors != 7120 || d1.ms != 54 {
		t.Fatalf("parseBlockStat = %+v", d1)
	}
	if parseBlockStat("1 2 3").ok || parseBlockStat("1 2 x 4").ok {
		t.Fatal("a short or malformed stat line was taken")
	}
	lat := make([]time.Duration, 10)
	for i := range lat {
		lat[i] = 900 * time.Microsecond
	}
	var s stages
	s.add(sample{info: zero, disk: d0}, sample{info: info, disk: d1}, lat)
	want := "seen by the client 900 µs; in the server 500 µs (reply write 80); per device batch (10 batches for 10 GETs): queued (for the ring's thread; with aio, io_submit) 100, device and completion 250, caller's wake-up 70; the disk (kernel block statistics): 400 µs per read of 256 KiB (10 reads); outside the server (network, client, requests behind others on their connection) 400 µs"
	if got := s.String(); got != want {
		t.Fatalf("line\n got %s\nwant %s", got, want)
	}
	// With no time in the server but the disk's (400 µs a read) and the write (80), and the
	// 400 µs outside it as measured, a GET's cycle would be 880 µs against the 900 seen.
	if cycle, measured, ok := s.direct(); !ok || math.Abs(cycle-880) > 1e-9 || math.Abs(measured-900) > 1e-9 {
		t.Fatalf("direct = %v, %v, %v; want 880, 900, true", cycle, measured, ok)
	}
	var bare stages // no rings, no disk statistics
	noRing := map[string]int64{"rbctl_resp_get_timed": 4, "rbctl_resp_get_us": 400, "rbctl_resp_get_write_us": 40}
	bare.add(sample{info: map[string]int64{"rbctl_resp_get_timed": 0, "rbctl_resp_get_us": 0, "rbctl_resp_get_write_us": 0}}, sample{info: noRing}, lat[:4])
	if got := bare.String(); strings.Contains(got, "batch") || !strings.Contains(got, "the disk's own time not measured") {
		t.Fatalf("without rings or disk statistics: %s", got)
	}
	if _, _, ok := bare.direct(); ok {
		t.Fatal("direct estimated without the disk's statistics")
	}
	s.add(sample{info: zero}, sample{info: noRing}, lat[:4]) // a phase without them turns them off
	if got := s.String(); strings.Contains(got, "batch") || !strings.Contains(got, "not measured") {
		t.Fatalf("after a phase without rings or disk statistics: %s", got)
	}
	var none stages // INFO failed before the phase: the line says why, and nothing is counted
	none.add(sample{err: errors.New("dial tcp: connection refused")}, sample{info: info}, lat)
	if got, want := none.String(), "not measured: dial tcp: connection refused"; got != want {
		t.Fatalf("a phase without INFO gave %q, want %q", got, want)
	}
	if _, _, ok := none.direct(); ok {
		t.Fatal("direct estimated without INFO")
	}
	var other stages // a server that is not rbctl serve
	other.add(sample{info: map[string]int64{"total_commands_processed": 1}}, sample{info: map[string]int64{"total_commands_processed": 9}}, lat)
	if got := other.String(); !strings.Contains(got, "not measured: the server's INFO has no rbctl_resp_get_timed") {
		t.Fatalf("a server without GET timings gave %q", got)
	}
}
