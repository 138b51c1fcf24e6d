package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
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
	nTools
)

var toolNames = [nTools]string{"fio", "fio-fixed", "rbctl", "engine"}

// row is one printed line of the result, kept for the summary.
type row struct {
	name  string
	ratio float64 // median of the rounds' ratios; 0: none measured
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
	tools := []int{toolDevice}
	if c.fio != "" {
		tools = append([]int{toolFio, toolFioFixed}, tools...)
	}
	if c.engine {
		tools = append(tools, toolEngine)
	}
	var (
		all        [][nTools]result // per round, every tool (zero: not run or failed)
		es         engineStats
		failed     bool
		engPayload int
	)
	for round := 0; round < c.rounds; round++ {
		var got [nTools]result
		order := make([]string, 0, len(tools))
		for k := range tools {
			t := tools[(k+round)%len(tools)]
			order = append(order, toolNames[t])
			var err error
			switch t {
			case toolFio, toolFioFixed:
				got[t], err = fioRun(c, bs, write, t == toolFioFixed)
			case toolDevice:
				got[t], err = rbctlRun(c, bs, write)
			case toolEngine:
				var st engineStats
				got[t], st, err = engineRun(c, bs, write)
				es.add(st, c.rounds)
				engPayload = st.payload
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "benchio: %s %s bs=%s round %d: %v\n", toolNames[t], rw, sizeName(bs), round+1, err)
				failed = true
				got[t] = result{}
			}
		}
		all = append(all, got)
		line := fmt.Sprintf("  round %d/%d %s bs=%s order=%s:", round+1, c.rounds, rw, sizeName(bs), strings.Join(order, ","))
		for _, t := range tools {
			line += fmt.Sprintf(" %s %.2f GB/s %.3f CPU-s/GB;", toolNames[t], got[t].bw/1e9, got[t].cpuPerGB)
		}
		fmt.Println(strings.TrimSuffix(line, ";"))
	}
	med := func(t int, cpu bool) float64 { return medianOf(all, t, cpu) }
	ref := reference(all)
	ratios := func(t int) []float64 { return roundRatios(all, t, ref) }
	f := med(ref, false)
	rows := []row{{name: fmt.Sprintf("%s %s", rw, sizeName(bs)), ratio: median(ratios(toolDevice))}}
	printRow(rw, bs, c.qd, f, med(toolDevice, false), ratios(toolDevice))
	if c.fio != "" {
		fmt.Printf("  detail: medians of %d rounds, reference %s; fio default %.2f GB/s, fio fixedbufs+registerfiles %.2f GB/s; CPU s/GB fio %.3f/%.3f rbctl %.3f\n",
			c.rounds, toolNames[ref], med(toolFio, false), med(toolFioFixed, false), med(toolFio, true), med(toolFioFixed, true), med(toolDevice, true))
	}
	if c.engine {
		name := "engine-get"
		if write {
			name = "engine-put"
		}
		er := ratios(toolEngine)
		rows = append(rows, row{name: fmt.Sprintf("%s %s", name, sizeName(bs)), ratio: median(er)})
		printRow(name, bs, c.qd, f, med(toolEngine, false), er)
		if c.fio != "" {
			perOp := "" // a load moves the payload, fio the whole block: the same ratio per op
			if !write && engPayload > 0 && len(er) > 0 {
				perOp = fmt.Sprintf(" (per op: %.2f)", median(er)*float64(bs)/float64(engPayload))
			}
			fmt.Printf("  detail: medians of %d rounds%s; CPU s/GB fio %.3f/%.3f engine %.3f; %s\n",
				c.rounds, perOp, med(toolFio, true), med(toolFioFixed, true), med(toolEngine, true), es.detail(write))
		}
	}
	return rows, failed
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

// reference is the fio job with the better median GB/s.
func reference(all [][nTools]result) int {
	if medianOf(all, toolFioFixed, false) > medianOf(all, toolFio, false) {
		return toolFioFixed
	}
	return toolFio
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

// printRow prints a result line: GB/s medians and the median of the rounds' ratios.
func printRow(name string, bs, qd int, fio, rbctl float64, ratios []float64) {
	ratio := "n/a"
	if len(ratios) > 0 {
		ratio = fmt.Sprintf("%.2f", median(ratios))
	}
	fmt.Printf("bench-io %s bs=%s qd=%d fio=%.2f GB/s rbctl=%.2f GB/s ratio_vs_fio=%s (rounds: %s)\n",
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
