package reports

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/workloads"
)

// HandlesOf converts the FTL model's per-handle counters over a window (Stats.Sub) into
// report rows, leaving out handles that neither wrote nor had data relocated. labels (may
// be nil) names what the policy put on each handle.
func HandlesOf(s ftl.Stats, labels map[int]string) []HandleWAF {
	var out []HandleWAF
	for i, h := range s.Handles {
		if h.HostBytes == 0 && h.RelocatedBytes == 0 {
			continue
		}
		r := HandleWAF{Handle: i, Label: labels[i], HostBytes: h.HostBytes, MediaBytes: h.MediaBytes, RelocatedBytes: h.RelocatedBytes}
		if s.HostBytes > 0 {
			r.HostShare = float64(h.HostBytes) / float64(s.HostBytes)
		}
		if h.HostBytes > 0 {
			r.WAF = float64(h.MediaBytes) / float64(h.HostBytes)
		}
		out = append(out, r)
	}
	return out
}

// LatencyOf summarises a nanosecond histogram.
func LatencyOf(op string, h *hdrhistogram.Histogram) Latency {
	us := func(v int64) float64 { return float64(v) / 1e3 }
	return Latency{Op: op, Count: h.TotalCount(), MeanUs: h.Mean() / 1e3,
		P50Us: us(h.ValueAtQuantile(50)), P99Us: us(h.ValueAtQuantile(99)),
		P999Us: us(h.ValueAtQuantile(99.9)), MaxUs: us(h.Max())}
}

// CDFOf samples a histogram's CDF at up to n points (log-spaced in rank near the tail).
func CDFOf(h *hdrhistogram.Histogram, n int) []CDFPoint {
	if h.TotalCount() == 0 {
		return nil
	}
	var out []CDFPoint
	qs := []float64{}
	for i := 0; i < n; i++ {
		// 0..90 % linearly, then 90, 99, 99.9, ... towards 100.
		f := float64(i) / float64(n-1)
		if f <= 0.5 {
			qs = append(qs, f*2*90)
		} else {
			tail := (f - 0.5) * 2 * 4 // 0..4 decades of tail
			q := 100 - 10*math.Pow(10, -tail)
			qs = append(qs, q)
		}
	}
	for _, q := range qs {
		out = append(out, CDFPoint{Us: float64(h.ValueAtQuantile(q)) / 1e3, Fraction: q / 100})
	}
	out = append(out, CDFPoint{Us: float64(h.Max()) / 1e3, Fraction: 1})
	return out
}

// MaxTraceTenants is the most salts a trace run lists tenant rows for: a trace salted by
// conversation root has thousands, which the report leaves out.
const MaxTraceTenants = 64

// FromResult fills the workload part of a run from a driver result: ops, bytes, rates,
// hit ratio, per-phase latency, tenant shares and the request CDF. withLatency is false for
// simulate, which has no wall clock: rates and latencies stay unset (null).
func FromResult(policy string, r *workloads.Result, withLatency bool) Run {
	c := r.Counters
	run := Run{Policy: policy, Ops: c.Ops, Requests: c.Requests, ElapsedSec: r.Elapsed.Seconds(),
		ReadBytes: c.BytesRead, WrittenBytes: c.BytesWritten, HitRatio: c.HitRatio(),
		Evicted: c.Evicted, Expired: c.Expired, StoreFailed: c.StoreFailed, ChunksHit: c.ChunksHit}
	run.Interrupted = r.Interrupted
	run.Trace = traceRunOf(c)
	if withLatency { // simulate has no clock: no queue
		run.Queue = r.Queue
	}
	if s := run.ElapsedSec; s > 0 && withLatency {
		run.OpsPerSec = F64(float64(c.Ops) / s)
		run.ReadGBps = F64(float64(c.BytesRead) / s / 1e9)
		run.WriteGBps = F64(float64(c.BytesWritten) / s / 1e9)
	}
	if withLatency {
		for p := workloads.Phase(0); p < workloads.NumPhases; p++ {
			if h := r.Latency[p]; h != nil && h.TotalCount() > 0 {
				run.Latency = append(run.Latency, LatencyOf(p.String(), h))
			}
		}
		if h := r.Latency[workloads.PhaseRequest]; h != nil {
			run.RequestCDF = CDFOf(h, 40)
		}
	}
	for i, s := range r.Salts {
		if i >= len(c.TenantRequests) || (run.Trace != nil && len(r.Salts) > MaxTraceTenants && r.Budgets == nil) {
			break
		}
		t := Tenant{Salt: s, Requests: c.TenantRequests[i], BytesWritten: c.TenantBytesWritten[i]}
		if c.TenantChunksRequested[i] > 0 {
			t.HitRatio = float64(c.TenantChunksHit[i]) / float64(c.TenantChunksRequested[i])
		}
		tenantBudget(&t, r, i)
		run.Tenants = append(run.Tenants, t)
	}
	return run
}
