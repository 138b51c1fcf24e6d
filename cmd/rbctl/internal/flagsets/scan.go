package flagsets

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
	"github.com/rbctl/rbctl/units"
)

// Scan is recover's rebuild of the index from the slot headers when no checkpoint is
// usable (engine.OpenOptions.Scan): --scan, or --force when the checkpoints are damaged
// (not on a device that was never formatted); the layout comes from the damaged
// checkpoints or from --slot-bytes (with --header-bytes, --block-align, --meta-bytes when
// not the defaults).
type Scan struct {
	On                 bool
	force              *bool
	slot, header, meta string
	align              int
}

// AddScan defines --scan and the layout flags a scan may need on cmd; force is the
// command's --force, which scans too when nothing else can recover.
func (s *Scan) AddScan(cmd *cobra.Command, force *bool) {
	s.force = force
	fs := cmd.Flags()
	fs.BoolVar(&s.On, "scan", false, "when no checkpoint is usable, rebuild the index from the key records in the slot headers (every header and payload verified; --force does it too)")
	fs.StringVar(&s.slot, "slot-bytes", "", "with --scan: the cache's slot size, when the damaged checkpoints do not show it")
	fs.StringVar(&s.header, "header-bytes", "", "with --scan and --slot-bytes: the slot header size (default 4096)")
	fs.StringVar(&s.meta, "meta-bytes", "", "with --scan and --slot-bytes: the metadata region (default: what a container header or format's auto sizing shows)")
	fs.IntVar(&s.align, "block-align", 0, "with --scan and --slot-bytes: block_align (default 4096)")
}

// mode is when to scan: --scan whenever no checkpoint is usable, --force only when the
// checkpoints are damaged.
func (s *Scan) mode() cache.ScanMode {
	switch {
	case s.On:
		return cache.ScanAlways
	case s.force != nil && *s.force:
		return cache.ScanDamaged
	}
	return cache.ScanNever
}

// hint is the layout the flags give a scan.
func (s *Scan) hint() (engine.ScanHint, error) {
	var h engine.ScanHint
	for _, f := range []struct {
		name, v string
		p       *int64
	}{{"slot-bytes", s.slot, &h.SlotBytes}, {"meta-bytes", s.meta, &h.MetaTotalBytes}, {"header-bytes", s.header, nil}} {
		if f.v == "" {
			continue
		}
		n, err := units.ParseSize(f.v)
		if err != nil {
			return h, fmt.Errorf("--%s: %w", f.name, err)
		}
		if f.p != nil {
			*f.p = n
		} else {
			h.HeaderBytes = int(min(n, 1<<30))
		}
	}
	if h.SlotBytes == 0 && (h.MetaTotalBytes != 0 || h.HeaderBytes != 0 || s.align != 0) {
		return h, fmt.Errorf("--header-bytes, --meta-bytes and --block-align describe the layout with --slot-bytes; give --slot-bytes too")
	}
	if h.SlotBytes != 0 && s.mode() == cache.ScanNever {
		return h, fmt.Errorf("--slot-bytes gives the layout to a scan of the slot headers: give --scan too (or --force, which scans when the checkpoints are damaged)")
	}
	h.BlockAlign = s.align
	return h, nil
}

// SlotProgress returns a progress callback drawing a bar of slots on stderr, and the
// function that ends it; nil and a no-op when quiet or stderr is not a terminal.
func SlotProgress(quiet bool, what string) (func(done, total int), func()) {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil, func() {}
	}
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	return func(done, total int) { bar.ChangeMax(total); _ = bar.Set(done) }, func() { _ = bar.Finish() }
}

// WarnUnused logs, for each device of rep that a checkpoint recovered although --scan was
// given, that no scan ran: --scan rebuilds only when no checkpoint is usable.
func (s *Scan) WarnUnused(rep *cachereport.Recoveries) {
	for i := 0; s.On && rep != nil && i < len(rep.Devices); i++ {
		if d := rep.Devices[i]; d.Recovery != nil && d.Scan == nil {
			slog.Warn("--scan rebuilds only when no checkpoint is usable: this index comes from the checkpoint", "device", d.Device, "container", d.Container, "seq", d.Seq)
		}
	}
}
