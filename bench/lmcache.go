package bench

import (
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
)

// A bench with Options.LMCache runs with an LMCache raw-block config (package lmcache): its
// devices (device_path, or per_tp_device_paths: one cache over them, rank r on device r),
// its I/O engine and queue depth, each device's engine layout (slot_bytes,
// meta_total_bytes, header, alignment, workers, checkpoint cadence, LMCache's v1
// checkpoint, its key namespace) and its FDP placement, run as one more policy named
// lmcache.FDP.RunName before Options.Policies. The placement identifiers are resolved
// against each device's own when it has FDP, else against the shadow model's handles
// 0..handles-1.

// ErrDevicesTwice: devices were given and the LMCache config names its own.
var ErrDevicesTwice = errors.New("devices given and the LMCache config names its own (device_path / per_tp_device_paths): give one or the other")

// applyLMCache takes the config's devices, I/O settings and routing into o and puts its
// run first.
func applyLMCache(o *Options) error {
	l := o.LMCache
	if o.Device != nil || o.Path != "" || len(o.Devices) > 0 || len(o.Paths) > 0 {
		return ErrDevicesTwice
	}
	perTP := false
	for _, d := range l.Config.Devices {
		o.Paths = append(o.Paths, d.Path)
		o.ShardRanks = append(o.ShardRanks, uint64(d.Rank))
		perTP = perTP || d.TP
	}
	if !perTP {
		o.ShardRanks = nil // device_path: one device, every rank
	}
	oo := l.Config.OpenOptions()
	o.IOPath, o.QueueDepth = oo.IOPath, oo.QueueDepth
	if len(o.Paths) > 1 || o.ShardRanks != nil {
		// per_tp_device_paths: worker r's keys on the device of rank r, as LMCache routes them
		o.ShardBy = string(sharded.RouteKVRank)
	}
	o.Policies = append([]string{l.RunName()}, o.Policies...)
	return nil
}

// isLMCacheRun reports whether pol is the LMCache config's run.
func isLMCacheRun(o *Options, pol string) bool { return o.LMCache != nil && lmcache.IsRun(pol) }

// lmcacheLegacy reports whether the config's keys are in the legacy namespace (non-MP
// backend).
func lmcacheLegacy(o *Options) bool {
	return o.LMCache != nil && o.LMCache.Config.Flavor == lmcache.Legacy
}

// lmcacheEngineConfig is device i's engine config from the file, with what bench needs of
// it: a fresh cache per policy and its deallocate setting; the workload's chunk must fit a
// slot.
func lmcacheEngineConfig(o *Options, i int, chunk int) (engine.Config, error) {
	l := o.LMCache
	c := l.Config.Devices[i].Engine
	c.LoadCheckpoint = false
	c.DeallocateOnDelete = o.Deallocate
	c.DeallocateInline = o.Workload.Workers <= 1 // as engineConfig
	if need := engine.SlotBytesFor(chunk); need > c.SlotBytes {
		return c, fmt.Errorf("%s: the workload's %d-byte chunks need %d-byte slots, the config's slot_bytes is %d", l.Path, chunk, need, c.SlotBytes)
	}
	return c, nil
}

// lmcachePolicy is the config's placement on shard s: data policy, metadata handle, slot
// reuse. Without fdp_enabled nothing is placed (meta_checkpoint_placement_id included), as
// lmcache.Format does.
func lmcachePolicy(l *lmcache.File, s *shard) (placement.Policy, placement.Handle, bool, error) {
	f := l.Config.FDP
	if !f.Enabled {
		return placement.NewNone(), placement.None, false, nil
	}
	pids := s.t.pids
	if pids == nil {
		pids = lmcache.HandlePIDs(s.handles)
	}
	pl, err := f.Resolve(pids, -1) // cache_salt_rank: the node's GPU count
	if err != nil {
		return nil, placement.None, false, fmt.Errorf("%s on %s: %w", l.Path, s.name, err)
	}
	return pl.Data(), pl.MetadataHandle, pl.SlotAffinity, nil
}

// lmcacheNotes says what the config's run took from the file.
func lmcacheNotes(l *lmcache.File) []string {
	return l.Notes(fmt.Sprintf("the LMCache config %s: its devices, layout, I/O engine and placement (fdp_enabled %v); "+
		"placement identifiers of a device without FDP are the shadow model's handles", l.Path, l.Config.FDP.Enabled))
}
