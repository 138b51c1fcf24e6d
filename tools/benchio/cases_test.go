package main

import (
	"math"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if !slices.Equal(in, []float64{3, 1, 2}) {
		t.Error("median reordered its input")
	}
}

// The reference is one fio job chosen over all rounds, not the better run of each round:
// against per-round maxima rbctl would lose whenever the two fio jobs swing apart.
func TestRoundRatiosUseOneReference(t *testing.T) {
	r := func(fio, fixed, dev, eng float64) [nTools]result {
		return [nTools]result{{bw: fio * 1e9}, {bw: fixed * 1e9}, {bw: dev * 1e9}, {bw: eng * 1e9}}
	}
	all := [][nTools]result{
		r(1.0, 2.0, 1.0, 0.9), // fio-fixed's burst round
		r(1.0, 0.8, 1.0, 0.5),
		r(1.0, 0.9, 1.1, 0), // engine failed this round
	}
	if ref := reference(all, toolFio, toolFioFixed); ref != toolFio { // medians 1.0 vs 0.9
		t.Fatalf("reference = %s, want fio", toolNames[ref])
	}
	if got := roundRatios(all, toolDevice, toolFio); !slices.Equal(got, []float64{1, 1, 1.1}) {
		t.Errorf("device ratios %v", got)
	}
	if got := roundRatios(all, toolEngine, toolFio); !slices.Equal(got, []float64{0.9, 0.5}) {
		t.Errorf("engine ratios %v (a failed run must be skipped, not counted as 0)", got)
	}
	if m := medianOf(all, toolEngine, false); m != 0.7 {
		t.Errorf("engine median %v, want 0.7 over the two runs", m)
	}
}

// The median's interval comes from order statistics: for 8 rounds the 2nd smallest and 2nd
// largest (coverage 1 - 2·9/256 = 93 %), for 4 rounds the whole range (87.5 %).
func TestMedianCI(t *testing.T) {
	for _, c := range []struct {
		in         []float64
		lo, hi, cv float64
	}{
		{[]float64{8, 1, 7, 2, 6, 3, 5, 4}, 2, 7, 1 - 2*9.0/256},
		{[]float64{4, 1, 3, 2}, 1, 4, 1 - 2.0/16},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 10, 1 - 2*(1+12+66)/4096.0},
	} {
		lo, hi, cv, ok := medianCI(c.in)
		if !ok || lo != c.lo || hi != c.hi || math.Abs(cv-c.cv) > 1e-12 {
			t.Errorf("medianCI(%v) = %v, %v, %v, %v; want %v, %v, %v", c.in, lo, hi, cv, ok, c.lo, c.hi, c.cv)
		}
	}
	if _, _, _, ok := medianCI(nil); ok {
		t.Error("medianCI(nil) reported an interval")
	}
}

// Every n rounds (2n for odd n) each tool runs in every position equally often and follows
// every other tool exactly as often as any other: the carry-over of one run into the next
// is spread evenly.
func TestRunOrderIsBalanced(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rows := n
		if n%2 == 1 {
			rows = 2 * n
		}
		follows := map[[2]int]int{}
		position := map[[2]int]int{}
		for r := 0; r < rows; r++ {
			o := runOrder(n, r)
			if s := slices.Sorted(slices.Values(o)); !slices.Equal(s, func() []int {
				x := make([]int, n)
				for i := range x {
					x[i] = i
				}
				return x
			}()) {
				t.Fatalf("n=%d round %d: %v is not an order of the %d tools", n, r, o, n)
			}
			for i, tool := range o {
				position[[2]int{tool, i}]++
				if i > 0 {
					follows[[2]int{o[i-1], tool}]++
				}
			}
		}
		for a := 0; a < n; a++ {
			for i := 0; i < n; i++ {
				if got := position[[2]int{a, i}]; got != rows/n {
					t.Errorf("n=%d: tool %d in position %d %d times, want %d", n, a, i, got, rows/n)
				}
			}
			for b := 0; b < n; b++ {
				if a == b {
					continue
				}
				if got := follows[[2]int{a, b}]; got != rows/n {
					t.Errorf("n=%d: %d then %d %d times, want %d", n, a, b, got, rows/n)
				}
			}
		}
	}
}

// TestResolveFioMem: without fio, benchio's buffers keep their huge pages unless -fio-mem
// malloc asks otherwise (a run with an empty -fio had put them in 4 KiB pages), and a bad mode is
// refused either way.
func TestResolveFioMem(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		withFio bool
		want    string
	}{
		{"auto", false, "shmhuge"},
		{"shmhuge", false, "shmhuge"},
		{"malloc", false, "malloc"},
		{"malloc", true, "malloc"},
	} {
		got, err := resolveFioMem(tc.mode, tc.withFio, 32, 1<<20)
		if err != nil || got != tc.want {
			t.Errorf("resolveFioMem(%q, fio %v) = %q, %v; want %q", tc.mode, tc.withFio, got, err, tc.want)
		}
	}
	for _, withFio := range []bool{false, true} {
		if got, err := resolveFioMem("huge", withFio, 32, 1<<20); err == nil {
			t.Errorf("resolveFioMem(\"huge\", fio %v) = %q, want an error", withFio, got)
		}
	}
	// With fio and auto, the choice follows the free huge pages; it is one of the two.
	if got, err := resolveFioMem("auto", true, 32, 1<<20); err != nil || (got != "shmhuge" && got != "malloc") {
		t.Errorf("resolveFioMem(auto, fio) = %q, %v", got, err)
	}
}
