package lmcache

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/placement"
)

// File is a config file as bench and simulate take it: where it was read from, what it
// configures, and the keys Load read past.
type File struct {
	Path     string
	Config   Config
	Warnings []Warning
}

// LoadFile reads the config file at path (Load); an error names the path.
func LoadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, warns, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Path: path, Config: cfg, Warnings: warns}, nil
}

// RunName is the name of the file's placement run (FDP.RunName).
func (f *File) RunName() string { return f.Config.FDP.RunName() }

// Notes are the report notes of the file's run: "RUN is " and took (what the run took from
// the file), then one line per warning.
func (f *File) Notes(took string) []string {
	out := []string{f.RunName() + " is " + took}
	for _, w := range f.Warnings {
		out = append(out, "LMCache config: "+w.String())
	}
	return out
}

// runPrefix starts the name of every LMCache config's run in a bench or simulate report.
const runPrefix = "lmcache:"

// RunName names a run of the FDP settings: "lmcache:" and fdp_data_placement_policy, or
// "lmcache:none" without fdp_enabled.
func (f FDP) RunName() string {
	if !f.Enabled {
		return runPrefix + PolicyNone
	}
	return runPrefix + f.DataPolicy
}

// IsRun reports whether a policy name is an LMCache config's run (RunName): placement.Parse
// does not know these names.
func IsRun(policy string) bool { return strings.HasPrefix(policy, runPrefix) }

// Summary lists the FDP settings after LMCache's defaulting, as the report notes give them.
func (f FDP) Summary() string {
	pids := "every non-zero identifier but the metadata one"
	if f.PlacementIDs != nil {
		pids = pidList(f.PlacementIDs)
	}
	meta := "none"
	if f.MetadataPID != 0 {
		meta = strconv.Itoa(int(f.MetadataPID))
	}
	return fmt.Sprintf("fdp_enabled %v, fdp_data_placement_policy %s, fdp_placement_ids %s, meta_checkpoint_placement_id %s, fdp_slot_reuse_policy %s",
		f.Enabled, f.DataPolicy, pids, meta, f.SlotReuse)
}

// HandlePIDs are the placement identifiers of a device whose handle i has identifier i: the
// FTL model's handles (one reclaim group, as rbctl emu numbers its reclaim unit handles),
// which a config is resolved against when the device reports no identifiers of its own.
func HandlePIDs(handles int) []uint16 {
	pids := make([]uint16, handles)
	for i := range pids {
		pids[i] = uint16(i)
	}
	return pids
}

// Data is the data placement policy, placement.NewNone() (no directive) when the config
// places no data: never nil.
func (p Placement) Data() placement.Policy {
	if p.Policy == nil {
		return placement.NewNone()
	}
	return p.Policy
}

// RunPolicy is the placement as one placement.Policy named name (RunName): data writes by
// Data, checkpoint writes (placement.Write.Metadata) on MetadataHandle. Its HandleLabels
// are the data policy's and "metadata".
func (p Placement) RunPolicy(name string) placement.Policy {
	return &runPolicy{Policy: p.Data(), meta: p.MetadataHandle, name: name}
}

// runPolicy is an LMCache data policy with checkpoints on meta_checkpoint_placement_id.
type runPolicy struct {
	placement.Policy
	meta placement.Handle
	name string
}

func (p *runPolicy) Place(w placement.Write) placement.Handle {
	if w.Metadata {
		return p.meta
	}
	return p.Policy.Place(w)
}

func (p *runPolicy) Name() string { return p.name }

// HandleLabels names the salts on each data handle and the metadata handle.
func (p *runPolicy) HandleLabels() map[int]string {
	labels := placement.Labels(p.Policy)
	if p.meta != placement.None {
		if labels == nil {
			labels = map[int]string{}
		}
		labels[int(p.meta)] = "metadata"
	}
	return labels
}
