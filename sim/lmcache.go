package sim

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rbctl/rbctl/engine/lmconfig"
	"github.com/rbctl/rbctl/placement"
)

// LMCache is the placement an LMCache raw-block config asks for (engine/lmconfig):
// fdp_enabled, fdp_placement_ids, fdp_data_placement_policy, meta_checkpoint_placement_id
// and fdp_slot_reuse_policy, run on the modelled device as one more policy. The model's
// handle i has placement identifier i (one reclaim group, as rbctl emu numbers its reclaim
// unit handles), so the config's identifiers are resolved against 0..handles-1 with
// LMCache's checks (lmconfig.FDP.Resolve). The config's layout (slot size, capacity,
// metadata region) and I/O settings are not modelled: the workload's chunk and the
// modelled device size set the simulated cache.
type LMCache struct {
	FDP      lmconfig.FDP
	Warnings []lmconfig.Warning // keys the file has that LMCache's raw-block backend does not
}

// LoadLMCache reads an LMCache config (lmconfig.Load); Options.Check resolves its
// placement against the model's handles.
func LoadLMCache(r io.Reader) (*LMCache, error) {
	cfg, warns, err := lmconfig.Load(r)
	if err != nil {
		return nil, err
	}
	return &LMCache{FDP: cfg.FDP, Warnings: warns}, nil
}

// Name labels the config's run: "lmcache:" and LMCache's policy name.
func (l *LMCache) Name() string {
	if !l.FDP.Enabled {
		return "lmcache:none"
	}
	return "lmcache:" + l.FDP.DataPolicy
}

// policy builds a fresh copy of the config's placement on a model with handles handles:
// its data policy, the metadata handle for checkpoints, and whether a free slot is reused
// by the handle it was last written with (pid_affinity).
func (l *LMCache) policy(handles int) (placement.Policy, bool, error) {
	pids := make([]uint16, handles)
	for i := range pids {
		pids[i] = uint16(i)
	}
	p, err := l.FDP.Resolve(pids, -1) // cache_salt_rank: the node's GPU count
	if err != nil {
		return nil, false, fmt.Errorf("LMCache config on a model with placement identifiers 0..%d: %w", handles-1, err)
	}
	data := p.Policy
	if data == nil {
		data = placement.NewNone()
	}
	return &lmcachePolicy{Policy: data, meta: p.MetadataHandle, name: l.Name()}, p.SlotAffinity || !l.FDP.Enabled, nil
}

// Notes says what the config's run took from the file.
func (l *LMCache) Notes() []string {
	f := l.FDP
	pids := "every non-zero identifier but the metadata one"
	if f.PlacementIDs != nil {
		s := make([]string, len(f.PlacementIDs))
		for i, id := range f.PlacementIDs {
			s[i] = fmt.Sprint(id)
		}
		pids = "[" + strings.Join(s, ", ") + "]"
	}
	meta := "none"
	if f.MetadataPID != 0 {
		meta = fmt.Sprint(f.MetadataPID)
	}
	out := []string{fmt.Sprintf("%s is the LMCache config's placement: fdp_enabled %v, fdp_data_placement_policy %s, fdp_placement_ids %s, "+
		"meta_checkpoint_placement_id %s, fdp_slot_reuse_policy %s, on placement identifiers 0..handles-1; the config's layout is not modelled",
		l.Name(), f.Enabled, f.DataPolicy, pids, meta, f.SlotReuse)}
	for _, w := range l.Warnings {
		out = append(out, "LMCache config: "+w.String())
	}
	return out
}

// lmcachePolicy is an LMCache data policy with checkpoints on meta_checkpoint_placement_id.
type lmcachePolicy struct {
	placement.Policy
	meta placement.Handle
	name string
}

func (p *lmcachePolicy) Place(w placement.Write) placement.Handle {
	if w.Metadata {
		return p.meta
	}
	return p.Policy.Place(w)
}

func (p *lmcachePolicy) Name() string { return p.name }

// HandleLabels names the salts on each data handle and the metadata handle.
func (p *lmcachePolicy) HandleLabels() map[int]string {
	labels := placement.Labels(p.Policy)
	if p.meta != placement.None {
		if labels == nil {
			labels = map[int]string{}
		}
		labels[int(p.meta)] = "metadata"
	}
	return labels
}

// LoadLMCacheFile is LoadLMCache of the file at path.
func LoadLMCacheFile(path string) (*LMCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := LoadLMCache(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
