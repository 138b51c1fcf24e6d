package sim

import (
	"fmt"

	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
)

// A simulation with Options.LMCache runs the placement an LMCache raw-block config asks
// for (package lmcache): fdp_enabled, fdp_placement_ids, fdp_data_placement_policy,
// meta_checkpoint_placement_id and fdp_slot_reuse_policy, on the modelled device as one
// more policy named lmcache.FDP.RunName. The model's handle i has placement identifier i
// (lmcache.HandlePIDs), so the config's identifiers are resolved against 0..handles-1 with
// LMCache's checks (lmcache.FDP.Resolve). The config's layout (slot size, capacity,
// metadata region) and I/O settings are not modelled: the workload's chunk and the
// modelled device size set the simulated cache.

// lmcachePolicy builds a fresh copy of the config's placement on a model with handles
// handles: its data policy with checkpoints on the metadata handle (also without
// fdp_enabled), and whether a free slot is reused by the handle it was last written with
// (pid_affinity; without FDP, as every other policy reuses slots).
func lmcachePolicy(l *lmcache.File, handles int) (placement.Policy, bool, error) {
	f := l.Config.FDP
	p, err := f.Resolve(lmcache.HandlePIDs(handles), -1) // cache_salt_rank: the node's GPU count
	if err != nil {
		return nil, false, fmt.Errorf("LMCache config on a model with placement identifiers 0..%d: %w", handles-1, err)
	}
	return p.RunPolicy(f.RunName()), p.SlotAffinity || !f.Enabled, nil
}

// lmcacheNotes says what the config's run took from the file.
func lmcacheNotes(l *lmcache.File) []string {
	return l.Notes("the LMCache config's placement: " + l.Config.FDP.Summary() +
		", on placement identifiers 0..handles-1; the config's layout is not modelled")
}
