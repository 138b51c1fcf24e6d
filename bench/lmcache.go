package bench

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/lmconfig"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/placement"
)

// LMCache is an LMCache raw-block config (engine/lmconfig) a bench runs with: its devices
// (device_path, or per_tp_device_paths: one cache over them, rank r on device r), its I/O
// engine and queue depth, each device's engine layout (slot_bytes, meta_total_bytes,
// header, alignment, workers, checkpoint cadence, LMCache's v1 checkpoint, its key
// namespace) and its FDP placement, run as one more policy named "lmcache:<policy>"
// before Options.Policies. The placement identifiers are resolved against each device's
// own when it has FDP, else against the shadow model's handles 0..handles-1.
type LMCache struct {
	File     string
	Config   lmconfig.Config
	Warnings []lmconfig.Warning
}

// LoadLMCache reads an LMCache config file.
func LoadLMCache(path string) (*LMCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, warns, err := lmconfig.Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &LMCache{File: path, Config: cfg, Warnings: warns}, nil
}

// ErrDevicesTwice: devices were given and the LMCache config names its own.
var ErrDevicesTwice = errors.New("devices given and the LMCache config names its own (device_path / per_tp_device_paths): give one or the other")

// Name is the config's run: "lmcache:" and its data placement policy.
func (l *LMCache) Name() string {
	if !l.Config.FDP.Enabled {
		return "lmcache:none"
	}
	return "lmcache:" + l.Config.FDP.DataPolicy
}

// apply takes the config's devices, I/O settings and routing into o and puts its run first.
func (l *LMCache) apply(o *Options) error {
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
	o.IOEngine, o.QueueDepth = oo.IOEngine, oo.QueueDepth
	if len(o.Paths) > 1 || o.ShardRanks != nil {
		// per_tp_device_paths: worker r's keys on the device of rank r, as LMCache routes them
		o.ShardBy = string(sharded.RouteKVRank)
	}
	o.Policies = append([]string{l.Name()}, o.Policies...)
	return nil
}

// engineConfig is device i's engine config from the file, with what bench needs of it: a
// fresh cache per policy and its deallocate setting; the workload's chunk must fit a slot.
func (l *LMCache) engineConfig(o *Options, i int, chunk int) (engine.Config, error) {
	c := l.Config.Devices[i].Engine
	c.LoadCheckpoint = false
	c.DeallocateOnDelete = o.Deallocate
	if need := engine.SlotBytesFor(chunk); need > c.SlotBytes {
		return c, fmt.Errorf("%s: the workload's %d-byte chunks need %d-byte slots, the config's slot_bytes is %d", l.File, chunk, need, c.SlotBytes)
	}
	return c, nil
}

// legacy reports whether the config's keys are in the legacy namespace (non-MP backend).
func (l *LMCache) legacy() bool { return l.Config.Flavor == lmconfig.Legacy }

// policy is the config's placement on shard s: data policy, metadata handle, slot reuse.
func (l *LMCache) policy(s *shard) (placement.Policy, placement.Handle, bool, error) {
	f := l.Config.FDP
	if !f.Enabled {
		return placement.NewNone(), placement.None, false, nil
	}
	pids := s.t.pids
	if pids == nil {
		pids = make([]uint16, s.handles)
		for i := range pids {
			pids[i] = uint16(i)
		}
	}
	pl, err := f.Resolve(pids, -1) // cache_salt_rank: the node's GPU count
	if err != nil {
		return nil, placement.None, false, fmt.Errorf("%s on %s: %w", l.File, s.name, err)
	}
	pol := pl.Policy
	if pol == nil {
		pol = placement.NewNone()
	}
	return pol, pl.MetadataHandle, pl.SlotAffinity, nil
}

// notes says what the config's run took from the file.
func (l *LMCache) notes() []string {
	out := []string{fmt.Sprintf("%s is the LMCache config %s: its devices, layout, I/O engine and placement (fdp_enabled %v); "+
		"placement identifiers of a device without FDP are the shadow model's handles", l.Name(), l.File, l.Config.FDP.Enabled)}
	for _, w := range l.Warnings {
		out = append(out, "LMCache config: "+w.String())
	}
	return out
}

func isLMCache(pol string) bool { return strings.HasPrefix(pol, "lmcache:") }
