package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// fixedOptions is a bench whose op stream and order are fixed: one worker, a request
// count, no duration, no warm-up, checkpoints only at the end.
func fixedOptions() Options {
	return Options{
		Policies: []string{"none", "cache-salt"},
		Workload: workloads.Spec{Kind: "uniform", Model: "tiny", ChunkTokens: 256, Requests: 1500, Seed: 7, Keys: 1000,
			ReadFrac: 0.5, ValueSize: 64 << 10, SyntheticTenants: 4, Util: 0.9, Workers: 1},
		WarmupTimeout: time.Minute, Deallocate: true, Handles: 8, RUBytes: 256 << 10, OP: 0.1,
		CheckpointInterval: time.Hour, QueueDepth: 32,
	}
}

// The library runs without a front end on an already-open device: every policy formats,
// runs the same op stream and reports a modelled WAF; the device is left open for the
// caller, and a second comparison on it gives the same figures.
func TestRunOnAnOpenDevice(t *testing.T) {
	dev := blockdev.NewMem(64<<20, 4096)
	o := fixedOptions()
	o.Device = dev
	var progress int
	o.Progress = func(p Progress) {
		if p.Done {
			progress++
			if p.Index != (progress-1)%2+1 || p.Of != 2 || p.Frac != 1 {
				t.Errorf("progress end %+v: want policy %d of 2", p, progress)
			}
		}
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Interrupted || progress != 2 {
		t.Fatalf("%d runs, interrupted %v, %d progress ends", len(rep.Runs), rep.Interrupted, progress)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || r.HostWAF == nil || r.HostWAF.HostBytes == 0 || r.HostWAF.Value < 1 || r.DeviceWAF != nil {
			t.Fatalf("%s: %+v", r.Policy, r)
		}
		if r.Ops != 1500 || r.WrittenBytes != rep.Runs[0].WrittenBytes {
			t.Fatalf("%s: %d ops, %d bytes written; want 1500 ops and the first run's %d bytes", r.Policy, r.Ops, r.WrittenBytes, rep.Runs[0].WrittenBytes)
		}
	}
	if rep.Device.Handles != 8 || rep.Device.RUBytes != 256<<10 || rep.Workload.Slots == 0 || rep.Window.MeasuredBytes == 0 {
		t.Fatalf("device %+v, workload %+v, window %+v", rep.Device, rep.Workload, rep.Window)
	}
	// The machine and its load around each run, for reading the figures.
	if h := rep.Host; h == nil || h.CPUs < 1 || h.GOMAXPROCS < 1 || h.Kernel == "" {
		t.Fatalf("host %+v", rep.Host)
	}
	if _, err := os.Stat("/proc/loadavg"); err == nil {
		for _, r := range rep.Runs {
			if len(strings.Fields(r.LoadStart)) != 3 || len(strings.Fields(r.LoadEnd)) != 3 {
				t.Fatalf("%s: load %q → %q", r.Policy, r.LoadStart, r.LoadEnd)
			}
		}
	}
	// Still open: a second comparison on the same device is possible and deterministic.
	rep2, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := rep.Runs[0].HostWAF, rep2.Runs[0].HostWAF; a.HostBytes != b.HostBytes {
		t.Fatalf("host bytes %d then %d on the same op stream", a.HostBytes, b.HostBytes)
	}
}

// A device path works the same way (mem:), and a shadow model that cannot make room is a
// note, explained by the caller's Explain, not a failure.
func TestRunInfeasibleShadowIsANote(t *testing.T) {
	o := fixedOptions()
	o.Path, o.RUBytes, o.OP, o.Policies = "mem:96M", 2<<20, 0.07, []string{"none"}
	o.Explain = func(err error) string {
		var ie *ftl.InfeasibleError
		if !errors.As(err, &ie) || ie.MinOP == 0 {
			t.Errorf("Explain got %v, want an *ftl.InfeasibleError with a feasible OP", err)
			return err.Error()
		}
		return err.Error() + " [explained]"
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.HostWAF != nil || r.Utilisation != nil || !strings.Contains(r.Note, "no host WAF estimate: garbage collection needs 9 spare RUs") ||
		!strings.HasSuffix(r.Note, "[explained]") || r.Ops != 1500 {
		t.Fatalf("run %+v", r)
	}
	// The host bytes are measured all the same, and the run says why it has no model.
	if r.HostBytes == nil || *r.HostBytes < r.WrittenBytes || !strings.Contains(r.NoModel, "needs 9 spare RUs") {
		t.Fatalf("host bytes %v for %d payload bytes, no_model %q", r.HostBytes, r.WrittenBytes, r.NoModel)
	}
}

// An emulated device whose geometry GC cannot run in is refused before it is created.
func TestRunRefusesInfeasibleEmulatorFirst(t *testing.T) {
	img := filepath.Join(t.TempDir(), "e.img")
	o := fixedOptions()
	o.Path = "emu:" + img + "?size=512M&ru=8M&ruhs=8&op=0.07"
	_, err := Run(context.Background(), o)
	var ie *ftl.InfeasibleError
	if !errors.As(err, &ie) || !errors.Is(err, ftl.ErrCannotReclaim) || ie.MinOP != 0.15 || ie.MaxRUBytes != 2<<20 {
		t.Fatalf("err %v (%+v)", err, ie)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused device was created: %v", err)
	}
	if _, err := Run(context.Background(), Options{Path: "mem:64M", Policies: []string{"frob"}}); err == nil {
		t.Fatal("an unknown policy was accepted")
	}
}

// An unknown precondition is refused before a device is created or a policy runs (it used
// to fail every policy, under a printed table, with the device made).
func TestRunRefusesUnknownPreconditionFirst(t *testing.T) {
	img := filepath.Join(t.TempDir(), "p.img")
	o := fixedOptions()
	o.Paths, o.Create, o.Precondition = []string{img}, 64<<20, "bogus"
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "want trim or fill") {
		t.Fatalf("precondition bogus: %v", err)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused bench created its device: %v", err)
	}
	for _, ok := range []string{"", "trim", "fresh", "fill", "sequential"} {
		if _, err := ParsePrecondition(ok); err != nil {
			t.Errorf("precondition %q: %v", ok, err)
		}
	}
}

// The feasibility check of an emulated device (sp.FTLConfig) is the configuration its model
// runs: emu.New builds the same model.
func TestEmulatorFTLMatches(t *testing.T) {
	for _, spec := range []string{"emu:mem?size=64M&ru=1M&ruhs=4&op=0.2", "emu:mem?size=96M&ru=2M&ruhs=8&rg=2&op=0.3&iso=persistent",
		"emu:mem?size=64M&ru=1M&ruhs=2&op=0.1&iso=persistent,initial&lba=512"} {
		sp, err := emu.ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := emu.New(sp)
		if err != nil {
			t.Fatal(err)
		}
		st := c.ModelStats()
		c.Close()
		m, err := ftl.New(sp.FTLConfig())
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Stats(); got.TotalRUs != st.TotalRUs || len(got.Handles) != len(st.Handles) || m.Config().MappingUnit != sp.MappingUnit {
			t.Errorf("%s: our model %d RUs %d handles, the emulator's %d RUs %d handles", spec, got.TotalRUs, len(got.Handles), st.TotalRUs, len(st.Handles))
		}
	}
}

// A failed policy leaves the others intact; an interruption stops the loop and marks the
// report with what it covers.
func TestRunAllFailuresAndInterruption(t *testing.T) {
	run := func(pol string) (reports.Run, error) {
		if pol == "cache-salt" {
			return reports.Run{}, errors.New("format: device went away")
		}
		return reports.Run{Policy: pol, Ops: 10}, nil
	}
	rep := reports.New("bench")
	resets := 0
	err := runAll(context.Background(), rep, []string{"none", "cache-salt", "hotness"}, time.Second, func() error { resets++; return nil }, run)
	if err != nil || len(rep.Runs) != 3 || !rep.Runs[1].Failed() || rep.Runs[1].Error != "format: device went away" || resets != 2 || rep.Interrupted {
		t.Fatalf("err %v, runs %+v, %d resets, interrupted %v", err, rep.Runs, resets, rep.Interrupted)
	}
	if _, err := os.Stat("/proc/loadavg"); err == nil && (rep.Runs[1].LoadStart == "" || rep.Runs[1].LoadEnd == "") {
		t.Fatalf("a failed run's load: %+v", rep.Runs[1]) // recorded for it too
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep = reports.New("bench")
	var ran []string
	err = runAll(ctx, rep, []string{"none", "cache-salt", "hotness"}, 5*time.Second, nil, func(pol string) (reports.Run, error) {
		ran = append(ran, pol)
		r := reports.Run{Policy: pol, ElapsedSec: 5}
		if pol == "cache-salt" {
			cancel()
			r.Interrupted, r.ElapsedSec = true, 1.25
		}
		return r, nil
	})
	if err != nil || len(ran) != 2 || !rep.Interrupted ||
		rep.Partial != "1 of 3 policies complete; cache-salt stopped 1.2 s into its 5s window; not run: hotness" {
		t.Fatalf("ran %v, err %v, interrupted %v, partial %q", ran, err, rep.Interrupted, rep.Partial)
	}
	if err := runAll(context.Background(), reports.New("bench"), []string{"a", "b"}, 0, func() error { return errors.New("gone") }, run); err == nil {
		t.Fatal("a failed reset was not an error")
	}
}

func TestWindowDescription(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		req  int64
		want string
	}{
		{20 * time.Second, 0, "warm-up (≤ 1m0s), for 20s; steady"},
		{0, 2500, "until 2500 requests in total (the same op stream for every policy)"},
		{time.Second, 150, "for 1s or until 150 requests in total, whichever comes first"},
		{0, 0, "until the workload ends"},
	} {
		if got := WindowDescription(1, time.Minute, tc.d, tc.req); !strings.Contains(got, tc.want) {
			t.Errorf("duration %s, requests %d: %q lacks %q", tc.d, tc.req, got, tc.want)
		}
	}
}
