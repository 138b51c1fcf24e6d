package emu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
)

// savedState is kept in PATH.fdp beside a file-backed device's data: the geometry (so the
// device reopens as it was made), the FDP feature and event enables, the counters, and the
// event logs. The FTL's map is not saved; it is rebuilt from the data file's extents.
type savedState struct {
	Version     int              `json:"version"`
	Size        int64            `json:"size"`
	LBASize     int              `json:"lba"`
	RUSize      int64            `json:"ru"`
	RUHs        int              `json:"ruhs"`
	RGs         int              `json:"rg"`
	OP          float64          `json:"op"`
	Isolation   string           `json:"iso"`
	GC          string           `json:"gc"`
	MappingUnit int64            `json:"mu"`
	Feature     fdp.FeatureState `json:"feature"`
	Enables     [][]bool         `json:"event_enables"`
	Stats       fdp.Stats        `json:"stats"`
	HostEvents  []fdp.Event      `json:"host_events,omitempty"`
	CtrlEvents  []fdp.Event      `json:"ctrl_events,omitempty"`
}

const stateVersion = 1

func statePath(data string) string { return data + ".fdp" }

// Files are the files an emulated SSD of spec keeps: its data file and its state file
// (none for emu:mem or a spec that does not parse).
func Files(spec string) []string {
	sp, err := ParseSpec(spec)
	if err != nil || sp.Path == "" {
		return nil
	}
	return []string{sp.Path, statePath(sp.Path)}
}

func loadState(path string) (*savedState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("emu: read state: %w", err)
	}
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("emu: state file %s is damaged (%v); delete it to start the FDP state afresh (the data is kept)", path, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("emu: state file %s has version %d, this rbctl reads %d", path, s.Version, stateVersion)
	}
	return &s, nil
}

// merge takes the saved geometry for every parameter the spec string left out, and fails
// when the spec asks for a different one.
func (s *savedState) merge(sp Spec) (Spec, error) {
	iso, isoList, err := parseIsolation(s.Isolation)
	if err != nil {
		return sp, err
	}
	gc, err := ftl.ParseGCPolicy(s.GC)
	if err != nil {
		return sp, err
	}
	saved := Spec{Path: sp.Path, Size: s.Size, LBASize: s.LBASize, RUSize: s.RUSize, RUHs: s.RUHs, RGs: s.RGs,
		OP: s.OP, Isolation: iso, HandleIsolation: isoList, GC: gc, MappingUnit: s.MappingUnit, FDP: s.Feature.Enabled}
	check := func(key string, same bool) error {
		if sp.given[key] && !same {
			return fmt.Errorf("%w: %s was created as %s; %s= differs (reopen with the same parameters, or delete %s and %s to make a new device)",
				ErrSpec, sp.Path, saved, key, sp.Path, statePath(sp.Path))
		}
		return nil
	}
	for _, e := range []error{
		check("size", sp.Size == saved.Size), check("lba", sp.LBASize == saved.LBASize),
		check("ru", sp.RUSize == saved.RUSize), check("ruhs", sp.RUHs == saved.RUHs),
		check("rg", sp.RGs == saved.RGs), check("op", sp.OP == saved.OP),
		check("iso", sp.isoString() == saved.isoString()), check("gc", sp.GC == saved.GC),
		check("mu", sp.MappingUnit == saved.MappingUnit),
	} {
		if e != nil {
			return sp, e
		}
	}
	if sp.given["fdp"] {
		saved.FDP = sp.FDP
	}
	saved.given = sp.given
	return saved, saved.validate()
}

func (s *savedState) apply(c *Controller) {
	c.feat = s.Feature
	if len(s.Enables) == len(c.enables) {
		for i := range s.Enables {
			if len(s.Enables[i]) == len(c.enables[i]) {
				copy(c.enables[i], s.Enables[i])
			}
		}
	}
	c.base = s.Stats
	c.host = s.HostEvents
	c.ctrl = s.CtrlEvents
}

// save writes PATH.fdp (atomically: a temporary file renamed over it) when its content may
// have changed. A memory device has nothing to save. The state is captured under c.mu and written outside it, so I/O does not
// wait for the file; saveMu keeps concurrent saves in capture order.
func (c *Controller) save() error {
	if c.spec.Path == "" || !c.dirty.Load() || (c.readOnly && !c.exclusive.Load()) {
		return nil // nothing changed, or a reader: only the lock's exclusive holder writes it
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	b, err := c.stateLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return writeState(statePath(c.spec.Path), b)
}

// stateLocked renders the state file.
func (c *Controller) stateLocked() ([]byte, error) {
	iso := c.spec.isoString()
	s := savedState{
		Version: stateVersion, Size: c.spec.Size, LBASize: c.spec.LBASize, RUSize: c.spec.RUSize,
		RUHs: c.spec.RUHs, RGs: c.spec.RGs, OP: c.spec.OP, Isolation: iso, GC: c.spec.GC.String(),
		MappingUnit: c.spec.MappingUnit, Feature: c.feat, Enables: c.enables, Stats: c.statsLocked(),
		HostEvents: c.host, CtrlEvents: c.ctrl,
	}
	b, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func writeState(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("emu: save state: %w", err)
	}
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("emu: save state: %w", err)
	}
	return nil
}

// ResolveSpec is the geometry opening spec would give: the spec string's parameters, and
// for those it leaves out the ones saved beside its data file (an existing device reopens as
// it was made, "emu:PATH" alone included); without a saved state, the spec as parsed. It
// reads the state file without the device's lock, for checks made before the device is
// opened: what the open finds is authoritative.
func ResolveSpec(spec string) (Spec, error) {
	sp, err := ParseSpec(spec)
	if err != nil || sp.Path == "" {
		return sp, err
	}
	saved, err := loadState(statePath(sp.Path))
	if err != nil || saved == nil {
		return sp, nil // the open reports a damaged state; a missing one means a new device
	}
	if merged, err := saved.merge(sp); err == nil {
		return merged, nil
	}
	return sp, nil // a spec that contradicts the saved geometry: the open refuses it
}
