package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/workloads"
)

func smallOptions() Options {
	return Options{
		Workload:   workloads.Spec{Kind: "kv", Model: "tiny", ChunkTokens: 256, MaxContext: 32768, Seed: 7, Util: 0.9, Workers: 1},
		DeviceSize: 4 << 30, OP: 0.07, Handles: 8, Policies: []string{"none", "cache-salt"}, Deallocate: true,
		CheckpointOps: 2000, WarmupCaps: 1, MeasureCaps: 2, MemAvailable: func() (int64, error) { return 1 << 40, nil },
	}
}

// The library runs a fixed-seed comparison without a front end: the same op stream for
// both policies, cache-salt below none, the same figures on a second run, and the report
// states the model it ran.
func TestRunFixedSeed(t *testing.T) {
	var seen []string
	o := smallOptions()
	o.Progress = func(run string, i, n int) { seen = append(seen, run) }
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Interrupted || len(seen) != 2 || rep.Device.Kind != "model" || rep.Device.Isolation != "initially-isolated" {
		t.Fatalf("%d runs, interrupted %v, progress %v, device %+v", len(rep.Runs), rep.Interrupted, seen, rep.Device)
	}
	none, cs := rep.Runs[0], rep.Runs[1]
	if none.HostWAF == nil || cs.HostWAF == nil || none.WrittenBytes != cs.WrittenBytes || cs.HostWAF.Value >= none.HostWAF.Value {
		t.Fatalf("none %+v / cache-salt %+v: want the same stream and cache-salt below none", none.HostWAF, cs.HostWAF)
	}
	again, err := Run(context.Background(), o)
	if err != nil || again.Runs[0].HostWAF.Value != none.HostWAF.Value || again.Runs[0].HostWAF.MediaBytes != none.HostWAF.MediaBytes {
		t.Fatalf("second run: %v, WAF %v vs %v", err, again.Runs[0].HostWAF, none.HostWAF)
	}
}

// A sweep runs every policy at every value; a cancelled context marks the report partial
// and names what did not run.
func TestRunSweepAndInterruption(t *testing.T) {
	o := smallOptions()
	o.DeviceSize, o.WarmupCaps, o.MeasureCaps = 1<<30, 0.2, 0.3
	sw, err := ParseSweep("util=0.6:0.8:0.1")
	if err != nil {
		t.Fatal(err)
	}
	o.Sweep = sw
	rep, err := Run(context.Background(), o)
	if err != nil || len(rep.Runs) != 6 || rep.Sweep != "util" || rep.Runs[5].Param != 0.8 {
		t.Fatalf("%v, %d runs, sweep %q", err, len(rep.Runs), rep.Sweep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.Progress = func(run string, i, n int) {
		if i == 1 {
			cancel()
		}
	}
	rep, err = Run(ctx, o)
	if err != nil || !rep.Interrupted || !strings.Contains(rep.Partial, "of 6 runs complete") ||
		!strings.Contains(rep.Partial, "not run: none @ util=0.7, cache-salt @ util=0.7, none @ util=0.8, cache-salt @ util=0.8") {
		t.Fatalf("%v, interrupted %v, partial %q", err, rep.Interrupted, rep.Partial)
	}
}

// Refusals come before anything runs, as typed errors a front end can phrase.
func TestRunRefusals(t *testing.T) {
	o := smallOptions()
	o.DeviceSize, o.OP, o.Isolation = 1<<40, 0.01, ftl.PersistentlyIsolated
	_, err := Run(context.Background(), o)
	var ie *ftl.InfeasibleError
	if !errors.As(err, &ie) || ie.Feasibility.NeedRUs() != 16 || ie.MinOP != 0.04 || ie.MaxRUBytes != 512<<20 {
		t.Fatalf("err %v (%+v)", err, ie)
	}
	o = smallOptions()
	o.DeviceSize = 64 << 40
	o.MemAvailable = func() (int64, error) { return 256 << 20, nil }
	_, err = Run(context.Background(), o)
	var me *MemoryError
	if !errors.As(err, &me) || !errors.Is(err, ErrNoMemory) || me.ModelDominates || me.FitsBytes <= 0 || me.FitsBytes >= 64<<40 {
		t.Fatalf("err %v (%+v)", err, me)
	}
	o = smallOptions()
	o.Policies = []string{"none", "oracle:nope"}
	if _, err := Run(context.Background(), o); err == nil {
		t.Fatal("an unknown oracle was accepted")
	}
}

func TestParseSweep(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []float64
	}{
		{"util=0.5:0.95:0.05", []float64{0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95}},
		{"op=0.05:0.15:0.05", []float64{0.05, 0.1, 0.15}},
		{"ru=1G:4G:1G", []float64{1 << 30, 2 << 30, 3 << 30, 4 << 30}},
		{"size=256G,512G,1T", []float64{256 << 30, 512 << 30, 1 << 40}},
		{"util=0.9,0.5", []float64{0.9, 0.5}},
	} {
		sw, err := ParseSweep(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if len(sw.Values) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.in, sw.Values, c.want)
		}
		for i := range c.want {
			if d := sw.Values[i] - c.want[i]; d > 1e-9 || d < -1e-9 {
				t.Fatalf("%s: %v, want %v", c.in, sw.Values, c.want)
			}
		}
	}
	for _, bad := range []string{"util", "util=1:2", "util=0.9:0.5:0.1", "util=0.5:0.9:0", "x=1:2:1", "util=a:b:c", "util=0:1e9:1e-9", "util=NaN:1:1",
		"size=1G,1G", "size=1G,", "size=0,1G", "size=1G,x"} {
		if _, err := ParseSweep(bad); !errors.Is(err, ErrSweep) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestMemAvailable(t *testing.T) {
	if n, err := MemAvailable(); err != nil || n <= 0 {
		t.Fatalf("MemAvailable of this machine: %d, %v", n, err)
	}
}

func FuzzParseSweep(f *testing.F) {
	f.Add("util=0.5:0.95:0.05")
	f.Add("ru=1G:4G:1G")
	f.Add("size=256G,512G,1T")
	f.Add("util=1e20:1e20:1") // STEP below FROM's precision: once an endless loop
	f.Fuzz(func(t *testing.T, s string) {
		sw, err := ParseSweep(s)
		if err == nil && (len(sw.Values) == 0 || len(sw.Values) > 10001) {
			t.Fatalf("%q: %d values", s, len(sw.Values))
		}
	})
}
