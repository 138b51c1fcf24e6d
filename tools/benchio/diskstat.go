package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The block layer's view of a run: /sys/dev/block/MAJ:MIN/stat of the device that holds the
// file (the file's own device for a block device, the filesystem's otherwise), read before and
// after the measured window. It says what reached the disk per transfer: requests after
// merging, sectors, discards. Other processes writing to the same disk add to the counts, so
// on a shared disk read the figures as upper bounds.

// diskCounters are the fields of a block device's stat file benchio uses
// (Documentation/block/stat.rst).
type diskCounters struct {
	readIOs, readMerges, readSectors    uint64
	writeIOs, writeMerges, writeSectors uint64
	readTicks, writeTicks               uint64 // milliseconds requests of that direction spent in the block layer and the disk
	discardIOs, discardSectors          uint64
	flushIOs, flushTicks                uint64 // flush requests completed; milliseconds they spent
}

// diskStatPath is the stat file of the device holding path ("" when there is none, e.g. tmpfs).
func diskStatPath(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	dev := st.Dev
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		dev = st.Rdev
	}
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(dev), unix.Minor(dev))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// parseDiskStat decodes one stat file (11, 15 or 17 numbers).
func parseDiskStat(s string) (diskCounters, error) {
	f := strings.Fields(s)
	if len(f) < 11 {
		return diskCounters{}, fmt.Errorf("disk stat: %d fields, want at least 11", len(f))
	}
	v := make([]uint64, len(f))
	for i, x := range f {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return diskCounters{}, fmt.Errorf("disk stat field %d: %w", i+1, err)
		}
		v[i] = n
	}
	c := diskCounters{readIOs: v[0], readMerges: v[1], readSectors: v[2], readTicks: v[3], writeIOs: v[4], writeMerges: v[5], writeSectors: v[6], writeTicks: v[7]}
	if len(v) >= 15 {
		c.discardIOs, c.discardSectors = v[11], v[13]
	}
	if len(v) >= 17 {
		c.flushIOs, c.flushTicks = v[15], v[16]
	}
	return c, nil
}

// readDiskStat reads path's counters; ok is false when there is no stat file or it cannot be read.
func readDiskStat(path string) (diskCounters, bool) {
	if path == "" {
		return diskCounters{}, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return diskCounters{}, false
	}
	c, err := parseDiskStat(string(b))
	return c, err == nil
}

// diskDelta is what the disk received during one measured window. Requests per MiB and
// merges per MiB are per MiB the disk received (its own sector count), so they do not depend
// on how exactly the window lines up with the tool's; bytesRatio compares the disk's bytes
// with the tool's: 1 when every byte the tool moved reached the disk once (below 1: a cache
// answered; above: extra writes). For fio the window is only approximately fio's own
// (started from outside), so its bytesRatio is approximate.
type diskDelta struct {
	ok            bool
	reqPerMiB     float64 // completed requests (reads or writes, the run's direction) per MiB the disk moved
	kibPerReq     float64 // mean request size, KiB
	mergesPerMiB  float64 // requests merged into others (block-layer merges) per MiB the disk moved
	discardPerMiB float64 // discard requests per MiB the disk moved
	bytesRatio    float64 // disk bytes ÷ tool bytes
	msPerReq      float64 // mean time a request spent from the block layer to its completion, ms
	flushes       uint64
	flushMs       uint64 // milliseconds the flushes spent, summed
}

func diffDisk(a, b diskCounters, write bool, bytes int64) diskDelta {
	ios, merges, sectors, ticks := b.readIOs-a.readIOs, b.readMerges-a.readMerges, b.readSectors-a.readSectors, b.readTicks-a.readTicks
	if write {
		ios, merges, sectors, ticks = b.writeIOs-a.writeIOs, b.writeMerges-a.writeMerges, b.writeSectors-a.writeSectors, b.writeTicks-a.writeTicks
	}
	if bytes <= 0 || sectors == 0 {
		return diskDelta{}
	}
	mib := float64(sectors) / 2048
	return diskDelta{ok: true, reqPerMiB: float64(ios) / mib, kibPerReq: float64(sectors) / 2 / float64(max(ios, 1)),
		mergesPerMiB: float64(merges) / mib, discardPerMiB: float64(b.discardIOs-a.discardIOs) / mib,
		bytesRatio: float64(sectors) * 512 / float64(bytes), msPerReq: float64(ticks) / float64(max(ios, 1)), flushes: b.flushIOs - a.flushIOs, flushMs: b.flushTicks - a.flushTicks}
}

func (d diskDelta) String() string {
	if !d.ok {
		return "disk n/a"
	}
	s := fmt.Sprintf("disk %.2f req/MiB %.0f KiB/req %.2f ms/req %.2f merges/MiB bytes %.2f", d.reqPerMiB, d.kibPerReq, d.msPerReq, d.mergesPerMiB, d.bytesRatio)
	if d.discardPerMiB > 0.005 {
		s += fmt.Sprintf(" %.2f discards/MiB", d.discardPerMiB)
	}
	if d.flushes > 0 {
		s += fmt.Sprintf(" %d flushes (%d ms)", d.flushes, d.flushMs)
	}
	return s
}
