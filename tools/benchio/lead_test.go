package main

import (
	"testing"
	"time"
)

func TestFioStartup(t *testing.T) {
	launch := time.UnixMilli(1_000_000)
	for _, tc := range []struct {
		name              string
		report, runtimeMs int64
		ramp              time.Duration
		want              time.Duration
	}{
		// launched at 1,000,000 ms, reported at 1,001,604 after a 1,021 ms run and a 300 ms ramp
		{"measured", 1_001_604, 1021, 300 * time.Millisecond, 283 * time.Millisecond},
		{"no ramp", 1_001_100, 1000, 0, 100 * time.Millisecond},
		{"no timestamp", 0, 1000, 0, 0},
		{"no runtime", 1_001_100, 0, 0, 0},
		{"report before the run could end", 1_000_500, 1000, 0, 0},
		{"absurd", 1_000_000 + 2*60_000, 1000, 0, 0},
	} {
		if got := fioStartup(launch, tc.report, tc.runtimeMs, tc.ramp); got != tc.want {
			t.Errorf("%s: fioStartup = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseLead(t *testing.T) {
	var c config
	if err := parseLead(&c, "fio"); err != nil || !c.leadFio || c.lead != 0 {
		t.Fatalf("fio: %+v, %v", c, err)
	}
	c = config{}
	if err := parseLead(&c, "750ms"); err != nil || c.leadFio || c.lead != 750*time.Millisecond {
		t.Fatalf("750ms: leadFio %v lead %v, %v", c.leadFio, c.lead, err)
	}
	for _, bad := range []string{"", "-1s", "fast", "10"} {
		if err := parseLead(&config{}, bad); err == nil {
			t.Errorf("-lead %q accepted", bad)
		}
	}
	if err := parseLead(&config{}, "0"); err != nil {
		t.Errorf("-lead 0: %v", err)
	}
}

func TestMedianDuration(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{5 * ms}, 5 * ms},
		{[]time.Duration{9 * ms, 1 * ms, 5 * ms}, 5 * ms},
		{[]time.Duration{9 * ms, 1 * ms, 5 * ms, 7 * ms}, 5 * ms},
	} {
		if got := medianDuration(tc.in); got != tc.want {
			t.Errorf("medianDuration(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
