package emu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys/memlimit"
)

// OpenOptions say how OpenWith treats a file-backed device's data file (a memory device
// has none and ignores them).
type OpenOptions struct {
	// ReadOnly opens the data file read-only under a shared lock: any number of readers
	// (identify, fdp-status, inspect) run together, never beside a writer. Writes and
	// deallocates fail with Namespace Write Protected and PATH.fdp is not rewritten. A
	// command that changes the FDP state (Set Features, RUH Update) first converts the lock
	// to exclusive, and fails, changing nothing, while another process has the device open.
	ReadOnly bool
	// Create makes a missing data file (sparse, blockdev.DataFileMode) and its state file.
	// Without it a missing or empty data file is an error wrapping fs.ErrNotExist, and
	// nothing is created.
	Create bool
}

// Create makes the device a spec describes if its data file does not exist yet or is empty
// (no device either: what a command stopped while making one leaves), and reports whether it
// did; an existing device is left as it is. format creates a device this way before opening
// it like any other.
func Create(spec string) (bool, error) {
	sp, err := ParseSpec(spec)
	if err != nil || sp.Path == "" {
		return false, err
	}
	if st, err := os.Stat(sp.Path); err == nil && (st.Size() > 0 || !st.Mode().IsRegular()) {
		return false, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("emu: %w", err)
	}
	c, err := NewWith(sp, OpenOptions{Create: true})
	if err != nil {
		return false, err
	}
	created := c.dirty.Load()
	return created, c.Close()
}

// Reset returns the device to the state of a new one with the same geometry: every block
// deallocated, a fresh FTL (no reclaim unit written), FDP statistics, events and host
// counters at zero, every event type enabled. The FDP enable is kept. The data file and its
// lock stay: bench starts each policy's run on a reset device instead of deleting files.
func (c *Controller) Reset() error {
	if c.readOnly {
		return fmt.Errorf("emu: reset of %s: the device is open read-only", c.spec)
	}
	if c.isClosed() {
		return errClosed
	}
	model, err := newModel(c.spec)
	if err != nil {
		return err
	}
	if err := c.store.Deallocate(0, c.spec.Size); err != nil {
		return fmt.Errorf("emu: reset: deallocate the data: %w", err)
	}
	c.mu.Lock()
	fdpOn := c.feat.Enabled
	c.model = model
	c.rebuilt = model.Stats()
	c.base = fdp.Stats{}
	c.resetFeaturesLocked()
	c.feat.Enabled = fdpOn
	c.host, c.ctrl = nil, nil
	c.mu.Unlock()
	for _, n := range []interface{ Store(uint64) }{&c.readBytes, &c.writeBytes, &c.readCmds, &c.writeCmds} {
		n.Store(0)
	}
	c.dirty.Store(true)
	return c.save()
}

// FTLConfig is the FTL model configuration a device of this spec runs: what newModel builds,
// and what a caller that models the device without opening it (bench's feasibility check)
// must use.
func (sp Spec) FTLConfig() ftl.Config {
	return ftl.Config{
		MappingUnit:     sp.MappingUnit,
		LogicalBytes:    sp.Size,
		OP:              sp.OP,
		RUBytes:         sp.RUSize,
		ReclaimGroups:   sp.RGs,
		Handles:         sp.RUHs,
		Isolation:       sp.Isolation,
		HandleIsolation: sp.HandleIsolation,
		GC:              sp.GC,
	}
}

// CheckFeasible refuses, before a device of sp is made, a geometry whose garbage collection
// can run out of room (ftl.Config.CheckFeasible), offering op=, ru= and ruhs= as fixes.
func (sp Spec) CheckFeasible(what string) error {
	return sp.FTLConfig().CheckFeasible(what, ftl.Tunable{OP: true, OPMax: 1, RU: true, Handles: true})
}

// newModel builds the FTL model of a device.
func newModel(sp Spec) (*ftl.Model, error) {
	fc := sp.FTLConfig()
	if n, err := fc.MemoryBytes(); err == nil {
		if err := memlimit.Check("the FTL model of the emulated device", n); err != nil {
			return nil, err
		}
	}
	m, err := ftl.New(fc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	return m, nil
}

// resetFeaturesLocked sets the FDP feature and event enables of a new device.
func (c *Controller) resetFeaturesLocked() {
	c.feat = fdp.FeatureState{Enabled: c.spec.FDP}
	c.enables = make([][]bool, c.spec.RUHs)
	for i := range c.enables {
		c.enables[i] = make([]bool, len(supportedEvents))
		for j := range c.enables[i] {
			c.enables[i][j] = true
		}
	}
}

// claimWrite makes a controller opened ReadOnly the only user of its data file before a
// command changes the FDP state that PATH.fdp records (the lock goes from shared to
// exclusive). A controller opened for writing holds that already.
func (c *Controller) claimWrite() error {
	if !c.readOnly || c.exclusive.Load() {
		return nil
	}
	c.claimMu.Lock()
	defer c.claimMu.Unlock()
	if c.exclusive.Load() {
		return nil
	}
	if fs, ok := c.store.(*fileStore); ok {
		lost, err := blockdev.RelockFD(int(fs.f.Fd()), fs.path, true)
		if lost {
			c.lockLost.Store(true)
		}
		if err != nil {
			return fmt.Errorf("emu: changing the FDP state needs the device to itself: %w", err)
		}
	}
	c.exclusive.Store(true)
	return nil
}
