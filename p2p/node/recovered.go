package node

import (
	"log/slog"
	"time"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// logOpened says which fallbacks opening a device took (devices.Opened.Notes: a filesystem
// that refused O_DIRECT, a kernel without native AIO or io_uring), one line each, so that an
// operator whose node runs buffered or on another engine than asked is told so.
func logOpened(log *slog.Logger, od *devices.Opened) {
	for _, n := range od.Notes {
		log.Info("device opened with a fallback", "device", od.Path, "io_engine", od.IOPath, "note", n)
	}
}

// logRecovered says what opening a device found, so that an operator who restarted a node
// knows before the first request: at info a recovery that kept every entry (how many, the
// checkpoint used, how long it took); at warn one that left entries out — dropped because
// their slots failed verification, lost with a newer checkpoint it could not use, or an
// index rebuilt from the slot headers — with how many and the first reason.
func logRecovered(log *slog.Logger, path string, r engine.RecoveryReport) {
	if log == nil {
		return
	}
	attrs := []any{"device", path, "entries", r.Kept, "took", r.Duration.Round(time.Millisecond)}
	switch {
	case r.Scan != nil:
		attrs = append(attrs, "rebuilt_from_slot_headers", r.Scan.Rebuilt)
	case r.Container >= 0:
		attrs = append(attrs, "checkpoint_seq", r.Seq, "container", r.Container)
	}
	if len(r.Dropped) == 0 && !r.Selection.Fallback && r.Scan == nil {
		log.Info("cache recovered", attrs...)
		return
	}
	if n := len(r.Dropped); n > 0 {
		attrs = append(attrs, "dropped", n, "first_dropped", r.Dropped[0].Key, "why", r.Dropped[0].Reason)
	}
	if r.Selection.Fallback {
		attrs = append(attrs, "fallback", r.Selection.Reason, "rescued", len(r.Rescued), "not_rescued", len(r.NotRescued))
		if r.Selection.LostKnown {
			attrs = append(attrs, "newer_checkpoint_keys_missing", r.Selection.Lost)
		}
	}
	log.Warn("cache recovered without some entries (a get of one misses; rbctl inspect DEV shows the checkpoint chosen)", attrs...)
}

// recoveryProgress is an engine's Config.Progress for a node's start: it logs how far the
// verification of the slot headers has got, first once it has run for 5 s and then every
// 10 s (a 4M-entry cache of 1 KiB slots verifies in 2 s; millions of large slots take
// minutes on a slow drive), so that an operator waiting on a restart sees it move.
func recoveryProgress(log *slog.Logger, path string, now func() time.Time) func(done, total int) {
	next := now().Add(5 * time.Second)
	return func(done, total int) {
		if t := now(); done < total && !t.Before(next) {
			next = t.Add(10 * time.Second)
			log.Info("recovering cache: verifying slot headers", "device", path, "verified", done, "of", total)
		}
	}
}
