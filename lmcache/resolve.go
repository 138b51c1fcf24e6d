package lmcache

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// Placement is what a file's FDP settings mean on one device.
type Placement struct {
	// DataPIDs is the data placement pool in assignment order: fdp_placement_ids, or every
	// non-zero identifier the device reports except the metadata one.
	DataPIDs []uint16
	// Pool is DataPIDs as the device's placement handles (indices into its PID table).
	Pool []placement.Handle
	// Policy is engine.Config.Placer: LMCache's cache_salt_prefix or cache_salt_rank over
	// Pool, nil for none (no directive on data writes).
	Policy placement.Policy
	// MetadataHandle carries meta_checkpoint_placement_id; placement.None without it.
	MetadataHandle placement.Handle
	SlotAffinity   bool // fdp_slot_reuse_policy pid_affinity
}

// Apply sets the placement fields of an engine config.
func (p Placement) Apply(c *engine.Config) {
	c.Placer = p.Policy
	c.MetadataHandle = p.MetadataHandle
	c.SlotAffinity = p.SlotAffinity
}

// Resolve maps the FDP settings onto a device whose placement handle i has the placement
// identifier devicePIDs[i] (fdp.Discovery.PIDs: the RUH status order), with LMCache's
// checks at FDP discovery: the device reports identifiers, at least one non-zero; the
// metadata identifier and every configured data identifier are among them; some data
// identifier remains. gpus bounds cache_salt_rank's handles per bucket, as LMCache's quota
// is the node's visible GPU count (0: that policy places nothing); a negative gpus takes
// the node's count (placement.NodeGPUs: RBCTL_GPUS, CUDA_VISIBLE_DEVICES, the driver).
func (f FDP) Resolve(devicePIDs []uint16, gpus int) (Placement, error) {
	localRanks := gpus
	p := Placement{MetadataHandle: placement.None}
	index := map[uint16]int{}
	var nonzero []uint16
	for i, id := range devicePIDs {
		if _, dup := index[id]; dup {
			continue
		}
		index[id] = i
		if id != 0 {
			nonzero = append(nonzero, id)
		}
	}
	if f.MetadataPID != 0 {
		h, ok := index[f.MetadataPID]
		if !ok {
			return p, fieldErr("meta_checkpoint_placement_id", "%d is not reported by the device (placement identifiers %s)", f.MetadataPID, pidList(devicePIDs))
		}
		p.MetadataHandle = placement.Handle(h)
	}
	if !f.Enabled {
		return p, nil
	}
	if len(devicePIDs) == 0 {
		return p, fieldErr("fdp_enabled", "the device reports no placement identifiers (FDP is off or not supported)")
	}
	if len(nonzero) == 0 {
		return p, fieldErr("fdp_enabled", "the device reports no non-zero placement identifiers (only %s)", pidList(devicePIDs))
	}
	if f.PlacementIDs != nil {
		for _, id := range f.PlacementIDs {
			if _, ok := index[id]; !ok || id == 0 {
				return p, fieldErr("fdp_placement_ids", "%d is not reported by the device (non-zero identifiers %s)", id, pidList(nonzero))
			}
		}
		p.DataPIDs = append(p.DataPIDs, f.PlacementIDs...)
	} else {
		for _, id := range nonzero {
			if id != f.MetadataPID {
				p.DataPIDs = append(p.DataPIDs, id)
			}
		}
	}
	if len(p.DataPIDs) == 0 {
		return p, fieldErr("fdp_placement_ids", "no non-zero data placement identifier remains after excluding meta_checkpoint_placement_id %d", f.MetadataPID)
	}
	for _, id := range p.DataPIDs {
		p.Pool = append(p.Pool, placement.Handle(index[id]))
	}
	switch f.DataPolicy {
	case PolicyCacheSaltPrefix:
		p.Policy = placement.NewCacheSaltPrefix(p.Pool)
	case PolicyCacheSaltRank:
		if localRanks < 0 {
			n, err := placement.NodeGPUs()
			if err != nil {
				return p, fmt.Errorf("%w: cache_salt_rank: %w", ErrConfig, err)
			}
			localRanks = n
		}
		if localRanks > placement.MaxLocalRanks {
			return p, fmt.Errorf("%w: %d GPUs; want 0..%d", ErrConfig, localRanks, placement.MaxLocalRanks)
		}
		p.Policy = placement.NewCacheSaltLocalRank(p.Pool, localRanks)
	}
	p.SlotAffinity = f.SlotReuse == ReusePIDAffinity
	return p, nil
}

// pidList renders identifiers as a bracketed list, as LMCache's messages do.
func pidList(ids []uint16) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
