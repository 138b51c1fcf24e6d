package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys/memlimit"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// shard is one device of the bench's cache and what every policy's run on it shares.
type shard struct {
	t        *target
	name     string // the device as the report names it
	handles  int
	fc       ftl.Config // its shadow model
	ecfg     engine.Config
	model    *ftl.Model // lives as long as the device's own state
	slots    int64      // the engine's slots on the device
	noShadow string     // why this device gets no shadow estimate (the run goes on)
}

// planShard derives one device's shadow model and engine configuration and checks the
// policies against its handles.
func planShard(o *Options, i int, t *target, name, path string, src *workloads.Source) (*shard, error) {
	info := t.dev.Info()
	s := &shard{t: t, name: name, handles: t.handles}
	if s.handles == 0 {
		s.handles = o.Handles
	}
	for _, pol := range o.Policies {
		if isLMCacheRun(o, pol) {
			if _, _, _, err := lmcachePolicy(o.LMCache, s); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := placement.Parse(pol, s.handles); err != nil {
			return nil, fmt.Errorf("placement %s: %w", pol, err)
		}
	}
	ru, op, iso := t.ruBytes, o.OP, ftl.InitiallyIsolated
	if ru == 0 {
		ru = o.RUBytes
	}
	if t.emulated != nil {
		op, iso = t.emulated.OP, t.emulated.Isolation
	}
	if o.Isolation != nil {
		iso = *o.Isolation
	}
	const unit = 4096
	logical := info.Size / unit * unit
	s.fc = ftl.Config{MappingUnit: unit, LogicalBytes: logical, OP: op, RUBytes: ru / unit * unit, Handles: s.handles, Isolation: iso, GC: o.GC}
	slotBytes := engine.SlotBytesFor(src.ChunkBytes)
	s.ecfg = engineConfig(o, path, slotBytes, logical, ru)
	if o.LMCache != nil {
		var err error
		if s.ecfg, err = lmcacheEngineConfig(o, i, src.ChunkBytes); err != nil {
			return nil, err
		}
	}
	l, err := engine.ComputeLayout(s.ecfg, info.Size)
	if err != nil {
		return nil, err
	}
	s.slots = l.MaxSlots
	tun := modelTunable
	switch {
	case t.emulated != nil:
		tun = emuTunable
	case t.stats != nil:
		tun = shadowTunable
	}
	// The emulator's own FTL is the device: an infeasible one cannot run. On any other device
	// the shadow model is only an estimate and never blocks the run: without it the bench
	// reports the device's own WAF (FDP) or none, and the report says why.
	shadowErr := s.fc.CheckFeasible("the shadow FTL model of "+name, tun)
	if shadowErr == nil {
		if _, err := newModel(s.fc); err != nil {
			shadowErr = fmt.Errorf("the shadow FTL model of %s: %w", name, err)
		}
	}
	if shadowErr != nil {
		if t.emulated != nil {
			return nil, shadowErr
		}
		explain := o.Explain
		if explain == nil {
			explain = func(err error) string { return err.Error() }
		}
		s.noShadow = "no host WAF estimate: " + explain(shadowErr)
	}
	if t.reset != nil {
		reset := t.reset
		t.reset = func() error { s.model = nil; return reset() }
	}
	return s, nil
}

// sumFTL adds the counters and gauges of several models' snapshots (per handle too).
func sumFTL(ss []ftl.Stats) ftl.Stats {
	var t ftl.Stats
	for _, s := range ss {
		t.HostBytes += s.HostBytes
		t.MediaBytes += s.MediaBytes
		t.ErasedBytes += s.ErasedBytes
		t.RelocatedBytes += s.RelocatedBytes
		t.GCRuns += s.GCRuns
		t.DroppedEvents += s.DroppedEvents
		t.ValidBytes += s.ValidBytes
		t.TotalRUs += s.TotalRUs
		t.FreeRUs += s.FreeRUs
		t.OpenRUs += s.OpenRUs
		t.ClosedRUs += s.ClosedRUs
		for len(t.Handles) < len(s.Handles) {
			t.Handles = append(t.Handles, ftl.HandleStats{})
		}
		for i, h := range s.Handles {
			t.Handles[i].HostBytes += h.HostBytes
			t.Handles[i].MediaBytes += h.MediaBytes
			t.Handles[i].RelocatedBytes += h.RelocatedBytes
		}
	}
	return t
}

// quiesceAll holds every shadow's writes back (in order) and runs f once all are idle.
func quiesceAll(shs []*ShadowDevice, f func()) {
	if len(shs) == 0 {
		f()
		return
	}
	shs[0].Quiesce(func() { quiesceAll(shs[1:], f) })
}

// deviceWAF fills each device row's WAF — its FDP statistics over the window when it has
// them, else its shadow model's — and the total row's when every device has one of the
// same source.
func (p *planned) deviceWAF(rows []reports.DeviceRun, total *reports.DeviceRun, w *window, shs []*ShadowDevice, end []ftl.Stats, endDev []*fdp.Stats) {
	var host, media float64
	source := ""
	for i, s := range p.shards {
		var h, m float64
		switch {
		case i >= len(w.warmStats) || i >= len(end):
			source = "-" // stopped (Ctrl-C) before the warm-up ended: no window
			continue
		case s.t.stats != nil && w.devErr == nil && i < len(w.warmDev) && i < len(endDev) && w.warmDev[i] != nil && endDev[i] != nil:
			dd := endDev[i].Sub(w.warmDev[i])
			h, m = dd.HBMW.Float64(), dd.MBMW.Float64()
			rows[i].WAFSource = s.t.source
		case !shs[i].Infeasible():
			win := end[i].Sub(w.warmStats[i])
			h, m = float64(win.HostBytes), float64(win.MediaBytes)
			rows[i].WAFSource = reports.SourceModelled
		default:
			source = "-"
			continue
		}
		if h > 0 {
			rows[i].WAF = reports.F64(m / h)
		}
		host, media = host+h, media+m
		if source == "" {
			source = rows[i].WAFSource
		} else if source != rows[i].WAFSource {
			source = "-"
		}
	}
	if source != "-" && source != "" && host > 0 {
		total.WAF, total.WAFSource = reports.F64(media/host), source
	}
}

// on names device i in a message when the cache has several ("" for one).
func (p *planned) on(i int) string {
	if len(p.shards) == 1 {
		return ""
	}
	return p.shards[i].name + ": "
}

// names lists the devices.
func (p *planned) names() []string {
	out := make([]string, len(p.shards))
	for i, s := range p.shards {
		out[i] = s.name
	}
	return out
}

// kinds is the kind of every device, once each, joined.
func (p *planned) kinds() string {
	var ks []string
	for _, s := range p.shards {
		if k := s.t.kind(); !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return strings.Join(ks, "+")
}

// newModel builds a shadow FTL model after checking that its memory fits the process's
// limits (memlimit): the runtime dies of an allocation it cannot make, this refuses it.
func newModel(fc ftl.Config) (*ftl.Model, error) {
	if n, err := fc.MemoryBytes(); err == nil {
		if err := memlimit.Check("the FTL model", n); err != nil {
			return nil, err
		}
	}
	return ftl.New(fc)
}
