package reports

import (
	"fmt"
	"strconv"
	"strings"
)

// Queue depth of runs with arrival times (bench --speed on a trace or recording, --rate):
// workloads.QueueStats per run, shown as two tables — the share of the time at each depth
// with its percentiles, and per interval the depth and the latency of the ops that finished.

// queueNote says how the queue tables read.
const queueNote = "queue depth (QD) = ops due (their scheduled arrival passed) and not finished: waiting for a worker or being served; " +
	"its percentiles and the share of time at each depth are over the replayed span; the interval table cuts it in 16, " +
	"latency counted from when each op was due"

// queueDepth returns the depth table: per run, its time-weighted percentiles and the share
// of the time in each depth bucket.
func queueDepth(r *Report) ([]string, [][]string) {
	var rows [][]string
	for _, run := range shown(r) {
		q := run.Queue
		if q == nil {
			continue
		}
		var hist []string
		for _, b := range q.Depth {
			name := strconv.Itoa(b.Min)
			if b.Max > b.Min {
				name += "-" + strconv.Itoa(b.Max)
			}
			hist = append(hist, fmt.Sprintf("%s: %.1f%%", name, 100*b.Share))
		}
		rows = append(rows, []string{run.Policy, strconv.Itoa(q.P50), strconv.Itoa(q.P90), strconv.Itoa(q.P99), strconv.Itoa(q.Max),
			strings.Join(hist, ", ")})
	}
	return []string{"policy", "QD p50", "QD p90", "QD p99", "QD max", "share of time at queue depth"}, rows
}

// queueOverTime returns the interval table: per run and interval, the ops that finished, the
// mean and largest depth and their latency percentiles (from when each op was due).
func queueOverTime(r *Report) ([]string, [][]string) {
	var rows [][]string
	for _, run := range shown(r) {
		q := run.Queue
		if q == nil {
			continue
		}
		for _, iv := range q.Intervals {
			p50, p99 := "-", "-" // no op finished in it
			if iv.Ops > 0 {
				p50, p99 = us(iv.P50Us), us(iv.P99Us)
			}
			rows = append(rows, []string{run.Policy, f2(iv.EndSeconds), strconv.FormatInt(iv.Ops, 10), f2(iv.MeanDepth),
				strconv.Itoa(iv.MaxDepth), p50, p99})
		}
	}
	return []string{"policy", "until s", "ops done", "mean QD", "max QD", "p50", "p99"}, rows
}
