package bench

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// recorder measures each device of the sharded cache from the events the cache reports
// after every shard's part of a put or load batch: keys served and failed, payload bytes,
// the latency of the device's part, and when it last failed and last served. Figures start
// at begin (the measured window); errors before it are kept apart as warm-up errors.
type recorder struct {
	start atomic.Int64 // unix nanos of the measured window's start; 0 during warm-up
	devs  []*devCounters
}

type devCounters struct {
	mu                        sync.Mutex
	ops, errors               int64
	putBytes, getBytes        int64
	warmErrors                int64
	lat                       *hdrhistogram.Histogram
	firstErr, lastErr, lastOK time.Duration
	hasErr, hasOK             bool
	base                      engine.Stats // the engine's counters at begin (background errors)
}

func newRecorder(n int) *recorder {
	r := &recorder{devs: make([]*devCounters, n)}
	for i := range r.devs {
		r.devs[i] = &devCounters{lat: workloads.NewHistogram()}
	}
	return r
}

func (r *recorder) observe(ev sharded.Event) {
	if ev.Op != sharded.OpPut && ev.Op != sharded.OpLoad {
		return
	}
	d := r.devs[ev.Shard]
	start := r.start.Load()
	d.mu.Lock()
	defer d.mu.Unlock()
	if start == 0 {
		if ev.Err != nil {
			d.warmErrors += failed(ev)
		}
		return
	}
	at := time.Duration(ev.End.UnixNano() - start)
	d.ops += int64(ev.Keys)
	d.lat.RecordValue(int64(ev.Duration))
	if ev.Op == sharded.OpPut {
		d.putBytes += ev.Bytes
	} else {
		d.getBytes += ev.Bytes
	}
	if ev.Err != nil {
		d.errors += failed(ev)
		if !d.hasErr {
			d.firstErr, d.hasErr = at, true
		}
		d.lastErr = at
	} else {
		d.lastOK, d.hasOK = at, true
	}
}

// failed counts the keys an erroring event failed (at least one).
func failed(ev sharded.Event) int64 { return int64(max(1, ev.Keys-ev.OK)) }

// begin starts the measured window at t; stats are each engine's counters then.
func (r *recorder) begin(t time.Time, stats []engine.Stats) {
	for i, d := range r.devs {
		d.mu.Lock()
		d.ops, d.errors, d.putBytes, d.getBytes = 0, 0, 0, 0
		d.lat.Reset()
		d.hasErr, d.hasOK = false, false
		if i < len(stats) {
			d.base = stats[i]
		}
		d.mu.Unlock()
	}
	r.start.Store(t.UnixNano())
}

// rows returns each device's row and their total over a window of elapsed; end holds each
// engine's counters at the window's end (checkpoint and deallocate failures count as errors).
func (r *recorder) rows(names []string, elapsed time.Duration, end []engine.Stats) ([]reports.DeviceRun, reports.DeviceRun, int64) {
	out := make([]reports.DeviceRun, len(r.devs))
	total := reports.DeviceRun{Device: "total"}
	all := workloads.NewHistogram()
	var warmErrs int64
	mib := func(b int64) float64 {
		if elapsed <= 0 {
			return 0
		}
		return float64(b) / (1 << 20) / elapsed.Seconds()
	}
	secs := func(ok bool, d time.Duration) *float64 {
		if !ok {
			return nil
		}
		return reports.F64(d.Seconds())
	}
	for i, d := range r.devs {
		d.mu.Lock()
		row := reports.DeviceRun{Device: names[i], Ops: d.ops, Errors: d.errors, PutBytes: d.putBytes, GetBytes: d.getBytes,
			PutMiBs: mib(d.putBytes), GetMiBs: mib(d.getBytes), P50Us: float64(d.lat.ValueAtQuantile(50)) / 1e3,
			P99Us: float64(d.lat.ValueAtQuantile(99)) / 1e3, WAFSource: "none",
			FirstError: secs(d.hasErr, d.firstErr), LastError: secs(d.hasErr, d.lastErr), LastOK: secs(d.hasOK, d.lastOK)}
		if i < len(end) {
			row.Errors += end[i].CheckpointErrors - d.base.CheckpointErrors + end[i].DeallocateErrors - d.base.DeallocateErrors
		}
		all.Merge(d.lat)
		warmErrs += d.warmErrors
		d.mu.Unlock()
		out[i] = row
		total.Ops += row.Ops
		total.Errors += row.Errors
		total.PutBytes += row.PutBytes
		total.GetBytes += row.GetBytes
		total.FirstError = earliest(total.FirstError, row.FirstError)
		total.LastError = latest(total.LastError, row.LastError)
		total.LastOK = latest(total.LastOK, row.LastOK)
	}
	total.PutMiBs, total.GetMiBs = mib(total.PutBytes), mib(total.GetBytes)
	total.P50Us, total.P99Us = float64(all.ValueAtQuantile(50))/1e3, float64(all.ValueAtQuantile(99))/1e3
	total.WAFSource = "none"
	return out, total, warmErrs
}

func earliest(a, b *float64) *float64 {
	if a == nil || (b != nil && *b < *a) {
		return b
	}
	return a
}

func latest(a, b *float64) *float64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}
