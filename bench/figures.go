package bench

import (
	"strings"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
)

// figures fills run's WAF figures, timeline and utilisation from the recorded window. With
// several devices the host WAF is that of every shadow model's bytes summed (none when a
// device has no model), the device WAF that of every FDP log summed (none unless every
// device has one).
func (p *planned) figures(run *reports.Run, w *window, shs []*ShadowDevice, policy placement.Policy, end []ftl.Stats, endDev []*fdp.Stats, dealloc0 int64) {
	endStats := sumFTL(end)
	win := endStats.Sub(sumFTL(w.warmStats))
	var dealloc, logical int64
	models := true
	for i, sh := range shs {
		run.Infeasible = run.Infeasible || sh.Infeasible()
		dealloc += sh.DeallocatedBytes()
		logical += p.shards[i].fc.LogicalBytes
		models = models && p.shards[i].model != nil
	}
	run.HostBytes = reports.I64(writtenBytes(shs) - w.warmHost)
	if !run.Infeasible { // a model that gave up has no WAF to report
		run.HostWAF = &reports.WAF{Value: win.WAF(), Source: reports.SourceModelled, HostBytes: win.HostBytes, MediaBytes: win.MediaBytes,
			Handles: reports.HandlesOf(win, placement.Labels(policy))}
	} else {
		run.NoModel = p.noModel()
	}
	run.DeallocatedBytes = reports.I64(dealloc - dealloc0)
	if models {
		run.Utilisation = reports.F64(float64(endStats.ValidBytes) / float64(logical))
	}
	// Steady state: the second half of the measured window.
	var post []sample
	for _, s := range w.samples {
		if s.t >= w.warmAt {
			post = append(post, s)
		}
	}
	if len(post) >= 2 && run.HostWAF != nil {
		run.HostWAF.Steady = endStats.Sub(post[len(post)/2].stats).WAF()
	}
	ss := w.samples
	for i := 1; i < len(ss); i++ {
		a, z := ss[i-1], ss[i]
		dt := (z.t - a.t).Seconds()
		pt := reports.Point{Seconds: reports.F64(z.t.Seconds()), PayloadBytes: z.c.BytesWritten,
			OpsPerSec: reports.F64(float64(z.c.Ops-a.c.Ops) / dt), WriteGBps: reports.F64(float64(z.c.BytesWritten-a.c.BytesWritten) / dt / 1e9),
			ReadGBps: reports.F64(float64(z.c.BytesRead-a.c.BytesRead) / dt / 1e9)}
		if run.HostWAF != nil { // no model, no modelled WAF (null, never 0)
			pt.WAF, pt.CumWAF = reports.F64(z.stats.Sub(a.stats).WAF()), reports.F64(z.stats.Sub(ss[0].stats).WAF())
		}
		run.Timeline = append(run.Timeline, pt)
	}
	var host, media float64
	source := ""
	for i, s := range p.shards {
		if s.t.stats == nil {
			return
		}
		if w.devErr != nil {
			run.Error = strings.TrimPrefix(run.Error+"; ", "; ") + "FDP statistics: " + w.devErr.Error()
			return
		}
		if i >= len(w.warmDev) || i >= len(endDev) || w.warmDev[i] == nil || endDev[i] == nil {
			return // stopped (Ctrl-C) before the warm-up ended: no window to read
		}
		dd := endDev[i].Sub(w.warmDev[i])
		host, media = host+dd.HBMW.Float64(), media+dd.MBMW.Float64()
		if source == "" {
			source = s.t.source
		}
	}
	var value float64
	if host > 0 {
		value = media / host
	}
	run.DeviceWAF = &reports.WAF{Value: value, Source: source, HostBytes: uint64(host), MediaBytes: uint64(media)}
}

// writtenBytes is the bytes every device completed writing (measured at the shadow).
func writtenBytes(shs []*ShadowDevice) int64 {
	var n int64
	for _, sh := range shs {
		n += sh.WrittenBytes()
	}
	return n
}

// noModel says why a run has no modelled figures: the first device's reason the shadow
// model could not run (with what would make it feasible), or that it ran out of room.
func (p *planned) noModel() string {
	for i, s := range p.shards {
		if s.noShadow != "" {
			return p.on(i) + s.noShadow
		}
	}
	return "the shadow FTL model ran out of room part-way (GC found no victim): no modelled figures"
}
