package main

import (
	"math"
	"os"
	"testing"
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
