package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// One case is a block size and a direction. Each round runs every tool once on the same
// file, in an order that rotates from round to round (no tool always runs first, and every
// rbctl run has a fio run next to it in time). The fio reference is the fio job (default,
// or --fixedbufs --registerfiles: the features rbctl uses) with the better median; a
// round's ratio is rbctl ÷ that job's run in the same round, and the printed ratio is the
// median of the rounds' ratios: a burst of load from other processes spoils one round, not
// the row. (Taking the better of the two fio runs of each round instead would compare one
// noisy sample with the maximum of two, which favours fio the more the disk swings.)

const (
	toolFio = iota
	toolFioFixed
	toolDevice
	toolEngine
	// For engine-get: fio reading the bytes a load reads (bs - 4 KiB at 4 KiB into every
	// bs-aligned block), so the engine's payload reads are compared with the same transfers.
	toolFioPayload
	toolFioPayloadFixed
	// For engine-put: fio replaying the writes of the engine's last measured window
	// (replay.go), the same offsets and lengths in the same order.
	toolFioReplay
	// For engine-put: rbctl's device path replaying the same writes (replay.go).
	toolRbctlReplay
	nTools
)

var toolNames = [nTools]string{"fio", "fio-fixed", "rbctl", "engine", "fio-payload", "fio-payload-fixed", "fio-replay", "rbctl-replay"}

// runOrder is the order of n tools in round r: row r of a Williams design (rows r mod n of
// the square whose first row is 0, 1, n-1, 2, n-2, ...; for odd n the rows n..2n-1 are
// the first n reversed). Over every n rounds (2n for odd n) each tool runs first equally
// often and follows each other tool equally often, so a run that leaves the disk faster or
// slower for the next one (write-back, a burst allowance) favours no tool. A plain
// rotation would have each tool follow the same one almost every round.
func runOrder(n, r int) []int {
	first := make([]int, n)
	lo, hi := 1, n-1
	for i := 1; i < n; i++ {
		if i%2 == 1 {
			first[i], lo = lo, lo+1
		} else {
			first[i], hi = hi, hi-1
		}
	}
	rows := n
	if n%2 == 1 {
		rows = 2 * n
	}
	r %= rows
	out := make([]int, n)
	for i := range out {
		out[i] = (first[i] + r) % n
	}
	if r >= n {
		slices.Reverse(out)
	}
	return out
}

// row is one printed line of the result, kept for the summary.
type row struct {
	name  string
	ratio float64 // median of the rounds' ratios; 0: none measured
}

// medianDuration is the median of d (the lower middle of an even count), 0 for none.
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianCI is a distribution-free confidence interval for the median of v: the k-th
// smallest and k-th largest values, with the largest k whose coverage (1 - 2·P[Bin(n, ½) < k])
// is at least 90 %, and that coverage. With fewer than 5 values no k reaches 90 %; the
// interval is then the whole range, with its lower coverage. ok is false for an empty v.
func medianCI(v []float64) (lo, hi, coverage float64, ok bool) {
	n := len(v)
	if n == 0 {
		return 0, 0, 0, false
	}
	s := slices.Sorted(slices.Values(v))
	cover := func(k int) float64 { // 1 - 2·P[X <= k-1], X ~ Bin(n, 1/2)
		tail, c := 0.0, 1.0 // c = C(n, i)
		for i := 0; i < k; i++ {
			tail += c
			c = c * float64(n-i) / float64(i+1)
		}
		return 1 - 2*tail/math.Pow(2, float64(n))
	}
	k := 1
	for k+1 <= n/2 && cover(k+1) >= 0.90 {
		k++
	}
	return s[k-1], s[n-k], cover(k), true
}

// fmtList prints values with two decimals, space separated.
func fmtList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

// runCase runs the rounds of one case, prints its rows and returns them, and whether a run failed.
func runCase(c config, bs int, rw string) ([]row, bool) {
	write := rw == "write"
	failed := false
	tools := []int{toolDevice}
	if c.fio != "" {
		tools = append([]int{toolFio, toolFioFixed}, tools...)
	}
	if c.engine {
		tools = append(tools, toolEngine)
		if !write && c.fio != "" {
			tools = append(tools, toolFioPayload, toolFioPayloadFixed)
		}
		if write && c.fio != "" {
			tools = append(tools, toolFioReplay)
		}
		if write {
			tools = append(tools, toolRbctlReplay)
		}
	}
	if c.fioEngine == "libaio" { // libaio has no registered buffers or files
		tools = slices.DeleteFunc(tools, func(t int) bool { return t == toolFioFixed || t == toolFioPayloadFixed })
	}
	if len(c.tools) > 0 { // -tools: a subset, for diagnosis
		tools = slices.DeleteFunc(tools, func(t int) bool { return !slices.Contains(c.tools, toolNames[t]) })
	}
	engineReady := true
	if slices.Contains(tools, toolEngine) && !write {
		if err := prepareLoads(c, bs); err != nil {
			fmt.Fprintf(os.Stderr, "benchio: engine %s bs=%s: preparing the cache: %v\n", rw, sizeName(bs), err)
			failed = true
			engineReady = false
		}
	}
	// fio-replay replays the engine's last measured writes: one engine run before the rounds
	// records the first log, every engine round replaces it.
	var wlog *writeLog
	if slices.Contains(tools, toolFioReplay) || slices.Contains(tools, toolRbctlReplay) {
		wlog = &writeLog{}
		if _, _, err := engineRun(c, bs, true, wlog); err != nil {
			fmt.Fprintf(os.Stderr, "benchio: engine %s bs=%s: recording writes for fio-replay: %v\n", rw, sizeName(bs), err)
			failed = true
		}
	}
	var (
		all        [][nTools]result // per round, every tool (zero: not run or failed)
		fioLeads   []time.Duration  // fio's start-ups so far (-lead fio)
		es         engineStats
		engPayload int
	)
	// Whole Williams squares only (runOrder): the carry-over balances over complete ones.
	square := len(tools)
	if square%2 == 1 {
		square *= 2
	}
	rounds := (c.rounds + square - 1) / square * square
	if len(tools) == 1 {
		rounds = c.rounds
	}
	for round := 0; round < rounds; round++ {
		var got [nTools]result
		order := make([]string, 0, len(tools))
		for k := range tools {
			t := tools[runOrder(len(tools), round)[k]]
			order = append(order, toolNames[t])
			time.Sleep(c.gap)
			rc := c // this run's config: its lead
			if c.leadFio {
				rc.lead = medianDuration(fioLeads)
			}
			var err error
			if c.settle {
				if err := settle(rc.file); err != nil {
					fmt.Fprintf(os.Stderr, "benchio: settling %s before %s: %v\n", c.file, toolNames[t], err)
					failed = true
				}
			}
			switch t {
			case toolFio, toolFioFixed:
				got[t], err = fioRun(rc, fioJob{bs: bs, write: write, fixed: t == toolFioFixed})
			case toolFioPayload, toolFioPayloadFixed:
				got[t], err = fioRun(rc, payloadJob(bs, t == toolFioPayloadFixed))
			case toolFioReplay:
				got[t], err = fioReplay(rc, bs, wlog)
			case toolRbctlReplay:
				got[t], err = rbctlReplay(rc, bs, wlog)
			case toolDevice:
				got[t], err = rbctlRun(rc, bs, write)
			case toolEngine:
				if !engineReady {
					continue
				}
				var st engineStats
				got[t], st, err = engineRun(rc, bs, write, wlog)
				es.add(st, rounds)
				engPayload = st.payload
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "benchio: %s %s bs=%s round %d: %v\n", toolNames[t], rw, sizeName(bs), round+1, err)
				failed = true
				got[t] = result{}
			}
			if got[t].startup > 0 {
				fioLeads = append(fioLeads, got[t].startup)
			}
		}
		all = append(all, got)
		line := fmt.Sprintf("  round %d/%d %s bs=%s order=%s:", round+1, rounds, rw, sizeName(bs), strings.Join(order, ","))
		for _, t := range tools {
			if got[t].bw == 0 {
				line += fmt.Sprintf(" %s failed;", toolNames[t])
				continue
			}
			line += fmt.Sprintf(" %s %.2f GB/s %.3f CPU-s/GB qd %.1f %s;", toolNames[t], got[t].bw/1e9, got[t].cpuPerGB, got[t].depth, got[t].disk)
		}
		fmt.Println(strings.TrimSuffix(line, ";"))
	}
	if c.leadFio && len(fioLeads) > 0 {
		lo, hi := slices.Min(fioLeads), slices.Max(fioLeads)
		fmt.Printf("  lead: fio took %s from its launch to its first I/O (median of %d runs, %s–%s); each in-process run idled the median so far before its first\n",
			medianDuration(fioLeads).Round(time.Millisecond), len(fioLeads), lo.Round(time.Millisecond), hi.Round(time.Millisecond))
	}
	ran := func(t int) bool { return slices.Contains(tools, t) }
	med := func(t int, cpu bool) float64 { return medianOf(all, t, cpu) }
	// num prints a median, or n/a when the tool did not run or never succeeded.
	num := func(t int, cpu bool) string {
		v := med(t, cpu)
		switch {
		case v == 0:
			return "n/a"
		case cpu:
			return fmt.Sprintf("%.3f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	ref := reference(all, toolFio, toolFioFixed)
	var rows []row
	if ran(toolDevice) {
		r := roundRatios(all, toolDevice, ref)
		rows = append(rows, row{name: fmt.Sprintf("%s %s", rw, sizeName(bs)), ratio: median(r)})
		printRow(rw, bs, c.qd, num(ref, false), num(toolDevice, false), r)
		if c.fio != "" {
			fmt.Printf("  detail: medians of %d rounds, reference %s; fio default %s GB/s, fio fixedbufs+registerfiles %s GB/s; CPU s/GB fio %s/%s rbctl %s; mean in flight fio %s/%s rbctl %s\n",
				rounds, toolNames[ref], num(toolFio, false), num(toolFioFixed, false), num(toolFio, true), num(toolFioFixed, true), num(toolDevice, true),
				depthOf(all, toolFio), depthOf(all, toolFioFixed), depthOf(all, toolDevice))
		}
	}
	if ran(toolEngine) {
		name := "engine-get"
		if write {
			name = "engine-put"
		}
		// A put writes whole slots, as fio's job does. A load reads the payload only, so
		// its reference is fio reading the same transfers.
		pair := [2]int{toolFio, toolFioFixed}
		if !write {
			pair = [2]int{toolFioPayload, toolFioPayloadFixed}
		}
		eref := reference(all, pair[0], pair[1])
		if write && ran(toolFioReplay) { // fio writing what the engine wrote
			eref = toolFioReplay
		}
		er := roundRatios(all, toolEngine, eref)
		rows = append(rows, row{name: fmt.Sprintf("%s %s", name, sizeName(bs)), ratio: median(er)})
		printRow(name, bs, c.qd, num(eref, false), num(toolEngine, false), er)
		if dr := roundRatios(all, toolEngine, toolDevice); len(dr) > 1 {
			// The engine against the device row of the same rounds: what the engine adds to
			// the device path (checksum, index, header), the disk's swings mostly paired out.
			lo, hi, cov, _ := medianCI(dr)
			fmt.Printf("  vs device row: %s ÷ %s %s median %.2f ci%.0f=%.2f-%.2f (rounds: %s)\n", name, rw, sizeName(bs),
				median(dr), 100*math.Floor(100*cov)/100, lo, hi, fmtList(dr))
		}
		if rr := roundRatios(all, toolEngine, toolRbctlReplay); write && len(rr) > 0 {
			// The same writes through rbctl's device path without the engine: the gap to
			// fio-replay split into the engine's part and the ring path's.
			line := fmt.Sprintf("  vs rbctl-replay (rbctl's device path writing the engine's recorded writes, with its %d flushes and %d deallocations, %s GB/s, CPU s/GB %s, mean in flight %s): engine ÷ rbctl-replay %s",
				wlog.flushes(), wlog.deallocs(), num(toolRbctlReplay, false), num(toolRbctlReplay, true), depthOf(all, toolRbctlReplay), ratioCI(rr))
			if fr := roundRatios(all, toolRbctlReplay, toolFioReplay); len(fr) > 0 {
				line += "; rbctl-replay ÷ fio-replay " + ratioCI(fr)
			}
			fmt.Println(line)
		}
		if c.fio != "" {
			vs := ""
			if write && eref == toolFioReplay {
				fl := "its flushes not replayed"
				if c.replayFlushes {
					fl = fmt.Sprintf("with its %d flushes as datasyncs", wlog.flushes())
				}
				if n := wlog.deallocs(); n > 0 {
					fl += fmt.Sprintf(", without its %d deallocations (fio cannot trim a file)", n)
				}
				vs = fmt.Sprintf("; reference fio-replay: fio writing the engine's recorded offsets and lengths, %s (%s GB/s, CPU s/GB %s, mean in flight %s)",
					fl, num(toolFioReplay, false), num(toolFioReplay, true), depthOf(all, toolFioReplay))
				if wb := roundRatios(all, toolEngine, ref); len(wb) > 0 {
					vs += fmt.Sprintf("; against fio's random writes (%s) %.2f", toolNames[ref], median(wb))
				}
			}
			if !write {
				vs = fmt.Sprintf("; reference %s: fio reading %d bytes at %d into each %s block, the bytes a load reads (fio %s/%s GB/s)",
					toolNames[eref], engPayload, bs-engPayload, sizeName(bs), num(pair[0], false), num(pair[1], false))
				if wb := roundRatios(all, toolEngine, ref); len(wb) > 0 {
					vs += fmt.Sprintf("; against the whole-block %s job %.2f, per op %.2f", toolNames[ref], median(wb), median(wb)*float64(bs)/float64(max(engPayload, 1)))
				}
			}
			fmt.Printf("  detail: medians of %d rounds%s; CPU s/GB fio %s/%s engine %s; mean in flight fio %s/%s engine %s; %s\n",
				rounds, vs, num(pair[0], true), num(pair[1], true), num(toolEngine, true),
				depthOf(all, pair[0]), depthOf(all, pair[1]), depthOf(all, toolEngine), es.detail(write, c.register))
		}
	}
	return rows, failed
}

// depthOf is the median mean-in-flight of tool t over its successful rounds ("n/a": none).
func depthOf(all [][nTools]result, t int) string {
	var v []float64
	for _, got := range all {
		if got[t].bw > 0 && got[t].depth > 0 {
			v = append(v, got[t].depth)
		}
	}
	if len(v) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", median(v))
}

// medianOf is the median GB/s (or CPU s/GB) of tool t over the rounds it succeeded in.
func medianOf(all [][nTools]result, t int, cpu bool) float64 {
	var v []float64
	for _, got := range all {
		if got[t].bw > 0 {
			x := got[t].bw / 1e9
			if cpu {
				x = got[t].cpuPerGB
			}
			v = append(v, x)
		}
	}
	return median(v)
}

// reference is the fio job (a: default, b: fixedbufs+registerfiles) with the better median GB/s.
func reference(all [][nTools]result, a, b int) int {
	if medianOf(all, b, false) > medianOf(all, a, false) {
		return b
	}
	return a
}

// roundRatios is tool t's run ÷ the reference's run, for every round where both ran.
func roundRatios(all [][nTools]result, t, ref int) []float64 {
	var v []float64
	for _, got := range all {
		if got[t].bw > 0 && got[ref].bw > 0 {
			v = append(v, got[t].bw/got[ref].bw)
		}
	}
	return v
}

// ratioCI prints the median of ratios with its interval and the rounds' values.
func ratioCI(v []float64) string {
	lo, hi, cov, _ := medianCI(v)
	return fmt.Sprintf("median %.2f ci%.0f=%.2f-%.2f (rounds: %s)", median(v), 100*math.Floor(100*cov)/100, lo, hi, fmtList(v))
}

// printRow prints a result line: GB/s medians and the median of the rounds' ratios.
func printRow(name string, bs, qd int, fio, rbctl string, ratios []float64) {
	ratio := "n/a"
	if len(ratios) > 0 {
		ratio = fmt.Sprintf("%.2f", median(ratios))
		if lo, hi, cov, ok := medianCI(ratios); ok && len(ratios) > 1 {
			ratio += fmt.Sprintf(" median_ci%.0f=%.2f-%.2f", 100*math.Floor(100*cov)/100, lo, hi)
		}
	}
	fmt.Printf("bench-io %s bs=%s qd=%d fio=%s GB/s rbctl=%s GB/s ratio_vs_fio=%s (rounds: %s)\n",
		name, sizeName(bs), qd, fio, rbctl, ratio, fmtList(ratios))
}

// printSummary prints the lowest ratio and every row below target.
func printSummary(rows []row, target float64) {
	var low []string
	lowest := row{ratio: -1}
	for _, r := range rows {
		if r.ratio == 0 {
			continue
		}
		if lowest.ratio < 0 || r.ratio < lowest.ratio {
			lowest = r
		}
		if r.ratio < target {
			low = append(low, fmt.Sprintf("%s %.2f", r.name, r.ratio))
		}
	}
	if lowest.ratio < 0 {
		return
	}
	below := "none"
	if len(low) > 0 {
		below = strings.Join(low, ", ")
	}
	fmt.Printf("bench-io summary: %d rows, lowest median ratio %.2f (%s); below %.2f: %s\n", len(rows), lowest.ratio, lowest.name, target, below)
}
