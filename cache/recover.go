package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// ErrRefused marks a repair Recover did not write because it would do harm that only an
// explicit override accepts (RepairOptions.Force).
var ErrRefused = errors.New("nothing written")

// RepairOptions choose whether Recover writes the repaired checkpoint.
type RepairOptions struct {
	DryRun bool // report only
	Force  bool // write even when the choice is in doubt or the repaired index loses every key
}

// RecoverOptions describe a recover of every device of a cache.
type RecoverOptions struct {
	Paths  []string
	Repair RepairOptions // per device, as for one
	// VerifyPayload also checks every payload's CRC-32C (reads all data).
	VerifyPayload bool
	// Open opens the cache on path for recovery (read-only when readOnly), with tweak
	// applied to its config; the engine must recover with the context the caller gives
	// RecoverAll.
	Open func(path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error)
	// Progress, when set, is told the slots verified so far on all devices together.
	Progress func(done, total int)
}

// RecoverAll recovers every device of a cache at once, a goroutine each, as recover does
// one (Recover, every slot header verified): unless DryRun or Force, a device
// passes the safety gate for recover before it is opened to write; a device whose choice
// is refused, that fails, or that holds no cache has its own failure in the report, and
// the others are recovered all the same; nothing is written on a device once ctx is
// cancelled. The paths must be distinct (devices.Distinct). The error is nil when every device
// recovered, else a *cachereport.DevicesError.
func RecoverAll(ctx context.Context, o RecoverOptions) (*cachereport.Recoveries, error) {
	if err := devices.Distinct(o.Paths); err != nil {
		return nil, err
	}
	n := len(o.Paths)
	reps, errs := make([]*cachereport.Recovery, n), make([]error, n)
	progress := sumProgress(n, o.Progress)
	var wg sync.WaitGroup
	for i, p := range o.Paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = recoverOne(ctx, p, o, func(done, total int) { progress(i, done, total) })
		}()
	}
	wg.Wait()
	return cachereport.NewRecoveries(o.Paths, reps, errs)
}

func recoverOne(ctx context.Context, path string, o RecoverOptions, progress func(done, total int)) (*cachereport.Recovery, error) {
	if !o.Repair.DryRun {
		// Mounted, held, or holding something besides a cache: recover must not write there
		// (--force lifts the second, never the first).
		gate := safety.Gate
		if o.Repair.Force {
			gate = safety.GateInUse
		}
		if err := gate(safety.Recover, path); err != nil {
			return nil, err
		}
	}
	e, err := o.Open(path, o.Repair.DryRun, func(c *engine.Config) {
		c.VerifyOnLoad, c.VerifyPayloadOnRecover = true, o.VerifyPayload
		if o.Progress != nil {
			c.Progress = progress
		}
	})
	if err != nil {
		return nil, err // cancelled while verifying: the engine says so, and wrote nothing
	}
	return Recover(ctx, e, path, o.Repair)
}

// sumProgress returns a per-device progress callback that tells report (when set) the sums
// over all n devices, one call at a time.
func sumProgress(n int, report func(done, total int)) func(i, done, total int) {
	if report == nil {
		return func(int, int, int) {}
	}
	var mu sync.Mutex
	done, total := make([]int, n), make([]int, n)
	return func(i, d, t int) {
		mu.Lock()
		defer mu.Unlock()
		done[i], total[i] = d, t
		var sd, st int
		for j := range done {
			sd, st = sd+done[j], st+total[j]
		}
		report(sd, st)
	}
}

// Recover reports the recovery e (opened on path, with VerifyOnLoad) made and, unless
// opts.DryRun, writes the repaired checkpoint when anything needs repair. It closes e
// without a further checkpoint. A refused write returns the report and an error wrapping
// ErrRefused; ctx cancelled before the write returns one wrapping ctx.Err().
func Recover(ctx context.Context, e *engine.Engine, path string, opts RepairOptions) (*cachereport.Recovery, error) {
	st := e.Stats().Recovery
	u := e.Usage()
	r := &cachereport.Recovery{Device: path, DryRun: opts.DryRun, Container: st.Container, Seq: st.Seq, Format: string(st.Format),
		Choice: ChoiceOf(st.Selection), Loaded: st.Loaded, Kept: st.Kept, Dropped: droppedOf(st.Dropped), FreeSlots: u.SlotsFree,
		NeverUsed: u.SlotsTotal - u.NextSlot, TotalFree: u.SlotsFree + u.SlotsTotal - u.NextSlot, NextSlot: u.NextSlot,
		DurationMs: float64(st.Duration.Microseconds()) / 1000, Repairs: Repairs(st), Scan: scanOf(st.Scan),
		Rescued: append([]string{}, st.Rescued...), NotRescued: droppedOf(st.NotRescued)}
	var refused error
	if !opts.DryRun && len(r.Repairs) > 0 {
		if why := Refusal(st); why != "" && !opts.Force {
			r.Refused = why
			refused = fmt.Errorf("%s: %w: %s", path, ErrRefused, why)
		} else if ctx.Err() != nil {
			e.CloseNoCheckpoint()
			return nil, fmt.Errorf("stopped before writing the repaired checkpoint; nothing was written: %w", ctx.Err())
		} else if err := e.RepairCheckpoints(); err != nil {
			e.CloseNoCheckpoint()
			return nil, fmt.Errorf("%s: writing the repaired checkpoint: %w", path, err)
		} else {
			r.Written, r.NewSeq = true, e.Stats().CheckpointSeq
		}
	}
	if err := e.CloseNoCheckpoint(); err != nil {
		return nil, err
	}
	return r, refused
}
