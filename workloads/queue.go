package workloads

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Queue depth of a run with arrival times (a trace replayed at its speed, Poisson
// arrivals): an op is in the system from the time it was due until it finished, waiting
// for a worker or being served. The driver logs both times of every such op; QueueStats
// works out the depth over time from them afterwards, so nothing is sampled and no op
// pays more than an append.

// maxQueueEvents bounds the log (16 bytes an op): beyond it the stats cover the first ones.
const maxQueueEvents = 1 << 22

type queueEvent struct{ due, done time.Duration } // since the run's start

type queueLog struct {
	mu sync.Mutex
	ev []queueEvent
}

func (q *queueLog) add(due, done time.Duration) {
	q.mu.Lock()
	if len(q.ev) < maxQueueEvents {
		q.ev = append(q.ev, queueEvent{due, done})
	}
	q.mu.Unlock()
}

// QueueStats is the queue depth of a run with arrival times: the share of the time at each
// depth, its percentiles over time, and per interval the depth and the latency (from the
// due time) of the ops that finished in it.
type QueueStats struct {
	Ops       int64           `json:"ops"`
	Seconds   float64         `json:"seconds"` // from the first op due to the last done
	Depth     []DepthShare    `json:"depth"`   // buckets 0, 1, 2–3, 4–7, …
	P50       int             `json:"p50"`     // time-weighted depth percentiles
	P90       int             `json:"p90"`
	P99       int             `json:"p99"`
	Max       int             `json:"max"`
	Intervals []QueueInterval `json:"intervals"`
}

// DepthShare is the share of the time the depth was in [Min, Max].
type DepthShare struct {
	Min   int     `json:"min"`
	Max   int     `json:"max"`
	Share float64 `json:"share"`
}

// QueueInterval is one slice of the run: depth (time-weighted mean and max) and the
// latency of the ops that finished in it.
type QueueInterval struct {
	EndSeconds float64 `json:"end_s"` // since the first op was due
	Ops        int64   `json:"ops"`
	MeanDepth  float64 `json:"mean_depth"`
	MaxDepth   int     `json:"max_depth"`
	P50Us      float64 `json:"p50_us"`
	P99Us      float64 `json:"p99_us"`
}

// QueueIntervals is how many intervals QueueStats cuts a run into.
const QueueIntervals = 16

// stats works out the queue's figures; nil without events.
func (q *queueLog) stats() *QueueStats {
	q.mu.Lock()
	ev := slices.Clone(q.ev)
	q.mu.Unlock()
	if len(ev) == 0 {
		return nil
	}
	type edge struct {
		t time.Duration
		d int
	}
	edges := make([]edge, 0, 2*len(ev))
	for _, e := range ev {
		edges = append(edges, edge{e.due, 1}, edge{max(e.done, e.due), -1})
	}
	// At equal times a finish goes before an arrival: the depth never counts both.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.d, b.d)) })
	t0, t1 := edges[0].t, edges[len(edges)-1].t
	span := t1 - t0
	s := &QueueStats{Ops: int64(len(ev)), Seconds: span.Seconds()}
	iv := make([]QueueInterval, QueueIntervals)
	width := max(span/QueueIntervals, 1)
	timeAt := map[int]time.Duration{}
	depth := 0
	for i, e := range edges {
		if i > 0 {
			// depth held over [edges[i-1].t, e.t): spread it over the intervals it spans
			a, b := edges[i-1].t, e.t
			timeAt[depth] += b - a
			for a < b {
				k := min(int((a-t0)/width), QueueIntervals-1)
				end := min(b, t0+time.Duration(k+1)*width)
				if k == QueueIntervals-1 {
					end = b
				}
				iv[k].MeanDepth += float64(depth) * float64(end-a)
				a = end
			}
		}
		depth += e.d
		k := min(int((e.t-t0)/width), QueueIntervals-1)
		iv[k].MaxDepth = max(iv[k].MaxDepth, depth)
		s.Max = max(s.Max, depth)
	}
	lat := make([][]time.Duration, QueueIntervals)
	for _, e := range ev {
		k := min(int((max(e.done, e.due)-t0)/width), QueueIntervals-1)
		lat[k] = append(lat[k], max(e.done-e.due, 0))
	}
	for k := range iv {
		lo, hi := time.Duration(k)*width, time.Duration(k+1)*width
		if k == QueueIntervals-1 || hi > span {
			hi = span
		}
		iv[k].EndSeconds = hi.Seconds()
		if hi > lo {
			iv[k].MeanDepth /= float64(hi - lo)
		}
		iv[k].Ops = int64(len(lat[k]))
		if len(lat[k]) > 0 {
			slices.Sort(lat[k])
			iv[k].P50Us = float64(lat[k][len(lat[k])/2]) / 1e3
			iv[k].P99Us = float64(lat[k][min(len(lat[k])*99/100, len(lat[k])-1)]) / 1e3
		}
	}
	s.Intervals = iv
	// The time-weighted histogram and percentiles.
	depths := make([]int, 0, len(timeAt))
	for d := range timeAt {
		depths = append(depths, d)
	}
	slices.Sort(depths)
	var acc time.Duration
	pct := func(p float64) int {
		acc = 0
		for _, d := range depths {
			acc += timeAt[d]
			if float64(acc) >= p*float64(span) {
				return d
			}
		}
		return s.Max
	}
	if span > 0 {
		s.P50, s.P90, s.P99 = pct(0.5), pct(0.9), pct(0.99)
		for lo := 0; lo <= s.Max; lo = max(1, 2*lo) {
			hi := max(lo, 2*lo-1)
			var in time.Duration
			for _, d := range depths {
				if d >= lo && d <= hi {
					in += timeAt[d]
				}
			}
			s.Depth = append(s.Depth, DepthShare{Min: lo, Max: hi, Share: float64(in) / float64(span)})
		}
	}
	return s
}
