package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/reports"
)

// flagsIn returns the --flags a message names.
func flagsIn(msg string) []string { return regexp.MustCompile(`--[a-z][a-z-]*`).FindAllString(msg, -1) }

// On a device that is not the emulator the shadow model is only an estimate: a geometry it
// cannot hold never blocks the run; the report says why there is no estimate and which flag
// gives one.
func TestBenchRunsWithoutAnInfeasibleShadowModel(t *testing.T) {
	out, err := runCLI(t, "bench", "mem:96M", "--ru", "2M", "--placement", "none", "--requests", "300", "--duration", "0",
		"--warmup", "0", "--json", "--quiet")
	if err != nil {
		t.Fatalf("bench refused: %v", err)
	}
	for _, w := range []string{"no host WAF estimate", "needs 9 spare RUs", "has 3 (96 MiB, 2 MiB RUs, op 0.07)", "--op 0.19"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, `"host_waf": null`) || !strings.Contains(out, `"utilisation": null`) || strings.Contains(out, `"waf": 0`) {
		t.Errorf("a run without a model reports modelled figures (want null):\n%s", out)
	}
}

// The feasibility rule is checked before anything is created or run, and the refusal names
// the fix in flags the command has.
func TestBenchAndSimulateRefuseInfeasibleGeometry(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "e.img")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		// The demo's old device: 8 initially isolated handles need 8 - 1 + 1 + 1 = 9 spare RUs.
		{[]string{"bench", "emu:" + img + "?size=512M&ru=8M&ruhs=8&op=0.07"},
			[]string{"needs 9 spare RUs", "this emulated device has 4 (512 MiB, 8 MiB RUs, op 0.07)", "op=0.15", "ru= (at most 2M)", "in the emu: spec"}},
		{[]string{"bench", "emu:" + img + "?size=512M&ru=8M&ruhs=8&op=0.07&iso=persistent"},
			[]string{"needs 16 spare RUs", "8 GC RUs, one per persistently isolated handle", "op=0.25"}},
		{[]string{"simulate", "--capacity", "1T", "--op", "0.01"}, []string{"needs 16 spare RUs", "this model has 5", "--op 0.04", "--ru (at most 512M)"}},
		{[]string{"simulate", "--capacity", "1T", "--sweep", "op=0.01:0.1:0.03"}, []string{"--sweep op=0.01: garbage collection needs 16"}},
		{[]string{"simulate", "--capacity", "1T", "--reserve", "30"}, []string{"needs 45 spare RUs", "a reserve of 30"}},
	} {
		_, err := runCLI(t, tc.args...)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.args, err, w)
			}
		}
		cmd, _, _ := NewRoot().Find(tc.args[:1])
		for _, fl := range flagsIn(err.Error()) {
			if cmd.Flags().Lookup(strings.TrimPrefix(fl, "--")) == nil {
				t.Errorf("%v: the message names %s, which %s does not have: %v", tc.args, fl, tc.args[0], err)
			}
		}
		if strings.Contains(err.Error(), "RUsPerGroup") {
			t.Errorf("%v: names a model field, not a flag: %v", tc.args, err)
		}
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused bench created the emulated device: %v", err)
	}
	// The fixes it names work: the suggested op passes the check.
	for _, dev := range []string{"emu:" + img + "?size=512M&ru=8M&ruhs=8&op=0.15", "emu:" + img + "?size=512M&ru=2M&ruhs=8&op=0.07"} {
		sp, err := emu.ParseSpec(dev)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFeasible(emuFTLConfig(sp), "x", emuKnobs); err != nil {
			t.Errorf("%s: %v", dev, err)
		}
	}
}

// bench checks the emulator's geometry with the configuration the emulator gives its model.
func TestEmuFTLConfigMatchesEmulator(t *testing.T) {
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
		m, err := ftl.New(emuFTLConfig(sp))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Stats(); got.TotalRUs != st.TotalRUs || len(got.Handles) != len(st.Handles) || m.Config().MappingUnit != sp.MappingUnit {
			t.Errorf("%s: our model %d RUs %d handles, the emulator's %d RUs %d handles", spec, got.TotalRUs, len(got.Handles), st.TotalRUs, len(st.Handles))
		}
	}
}

// --save and --plot are checked before anything runs.
func TestOutputDestinationsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "e.img")
	for _, args := range [][]string{
		{"simulate", "--capacity", "64T", "--save", filepath.Join(file, "r.json")},
		{"simulate", "--capacity", "64T", "--plot", filepath.Join(file, "plots")},
		{"simulate", "--capacity", "64T", "--save", dir},
		{"bench", "emu:" + img + "?size=64M&ru=1M&ruhs=8&op=0.2", "--save", filepath.Join(file, "r.json")},
		{"bench", "emu:" + img + "?size=64M&ru=1M&ruhs=8&op=0.2", "--plot", file},
	} {
		start := time.Now()
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--save") && !strings.Contains(err.Error(), "--plot") {
			t.Errorf("%v: %v", args, err)
		}
		if d := time.Since(start); d > 20*time.Second { // a 64 TiB simulation would take minutes
			t.Errorf("%v: took %v: it ran before refusing", args, d)
		}
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the emulated device was created before the outputs were checked: %v", err)
	}
	// A missing directory is created and then written.
	out := filepath.Join(dir, "new", "deeper")
	if _, err := runCLI(t, "simulate", "--capacity", "1G", "--model", "tiny", "--placement", "none", "--warmup", "0.1", "--measure", "0.1",
		"--save", filepath.Join(out, "r.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "r.json")); err != nil {
		t.Fatal(err)
	}
}

// A simulation larger than the memory available is refused with the estimate and the fix.
func TestSimulateRefusesWhatDoesNotFit(t *testing.T) {
	old := memAvailable
	t.Cleanup(func() { memAvailable = old })
	memAvailable = func() (int64, error) { return 256 << 20, nil }
	// 64 TiB at 2 MiB units: a 224 MiB model and ~2 M slots of cache state; the cache part dominates.
	_, err := runCLI(t, "simulate", "--capacity", "64T")
	if err == nil || !strings.Contains(err.Error(), "needs about") || !strings.Contains(err.Error(), "256.0 MiB available") ||
		!regexp.MustCompile(`a smaller --capacity \(about [0-9]+[TGM] fits\)`).MatchString(err.Error()) {
		t.Fatalf("64T on a 256 MiB machine: %v", err)
	}
	// Small mapping units: the FTL model dominates and a bigger --unit is the fix.
	_, err = runCLI(t, "simulate", "--capacity", "1T", "--unit", "4K")
	if err == nil || !strings.Contains(err.Error(), "FTL model") || !strings.Contains(err.Error(), "a bigger --unit (8K or more") {
		t.Fatalf("1T at 4K units: %v", err)
	}
	sim, _, _ := NewRoot().Find([]string{"simulate"})
	for _, fl := range flagsIn(err.Error()) {
		if sim.Flags().Lookup(strings.TrimPrefix(fl, "--")) == nil {
			t.Errorf("the message names %s, which simulate does not have: %v", fl, err)
		}
	}
	memAvailable = func() (int64, error) { return 1 << 40, nil }
	if _, err := runCLI(t, "simulate", "--capacity", "1G", "--model", "tiny", "--placement", "none", "--warmup", "0.1", "--measure", "0.1"); err != nil {
		t.Fatal(err)
	}
	if n, err := old(); err != nil || n <= 0 {
		t.Fatalf("MemAvailable of this machine: %d, %v", n, err)
	}
}

// A failed policy leaves the others' table intact, its error goes under the table, and the
// command fails; an interruption stops the loop and marks the result.
func TestBenchRunAllFailuresAndInterruption(t *testing.T) {
	run := func(pol string) (reports.Run, reports.Workload, error) {
		if pol == "cache-salt" {
			return reports.Run{}, reports.Workload{}, errors.New("format: device went away")
		}
		return reports.Run{Policy: pol, Ops: 10, HostWAF: &reports.WAF{Value: 1.5, Source: reports.SourceModelled}}, reports.Workload{Name: "kv"}, nil
	}
	rep := reports.New("bench")
	resets := 0
	failed, err := benchRunAll(context.Background(), rep, []string{"none", "cache-salt", "hotness"}, time.Second,
		func() error { resets++; return nil }, run)
	if err != nil || len(failed) != 1 || failed[0] != "cache-salt" || len(rep.Runs) != 3 || resets != 2 || rep.Interrupted {
		t.Fatalf("failed %v, err %v, %d runs, %d resets, interrupted %v", failed, err, len(rep.Runs), resets, rep.Interrupted)
	}
	outcome := benchOutcome(rep, failed, 3)
	if outcome == nil || exitCode(context.Background(), outcome) != exitError || !strings.Contains(outcome.Error(), "1 of 3 policies failed (cache-salt)") {
		t.Fatalf("outcome %v", outcome)
	}
	var buf bytes.Buffer
	if err := reports.Table(&buf, rep); err != nil {
		t.Fatal(err)
	}
	end := strings.LastIndex(buf.String(), "-+\n") + len("-+\n") // the last table border
	table, under := buf.String()[:end], buf.String()[end:]
	if strings.Contains(table, "cache-salt") || !strings.Contains(table, "hotness") ||
		!strings.Contains(under, "error (cache-salt): format: device went away") {
		t.Fatalf("table:\n%s", buf.String())
	}

	// Interrupted while the second policy runs: it is kept as the partial run, the third never starts.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep = reports.New("bench")
	var ran []string
	_, err = benchRunAll(ctx, rep, []string{"none", "cache-salt", "hotness"}, 5*time.Second, nil, func(pol string) (reports.Run, reports.Workload, error) {
		ran = append(ran, pol)
		r := reports.Run{Policy: pol, ElapsedSec: 5}
		if pol == "cache-salt" {
			cancel()
			r.Interrupted, r.ElapsedSec = true, 1.25
		}
		return r, reports.Workload{}, nil
	})
	if err != nil || len(ran) != 2 || !rep.Interrupted ||
		rep.Partial != "1 of 3 policies complete; cache-salt stopped 1.2 s into its 5s window; not run: hotness" {
		t.Fatalf("ran %v, err %v, interrupted %v, partial %q", ran, err, rep.Interrupted, rep.Partial)
	}
	if outcome := benchOutcome(rep, nil, 3); !errors.Is(outcome, errInterrupted) || exitCode(context.Background(), outcome) != exitInterrupted {
		t.Fatalf("outcome %v", outcome)
	}
}

func TestParseMemAvailable(t *testing.T) {
	n, err := parseMemAvailable(strings.NewReader("MemTotal:       24684092 kB\nMemFree: 1 kB\nMemAvailable:   24180344 kB\n"))
	if err != nil || n != 24180344<<10 {
		t.Fatalf("%d %v", n, err)
	}
	for _, bad := range []string{"", "MemTotal: 5 kB\n", "MemAvailable: lots\n", "MemAvailable: -4 kB\n", "MemAvailable: 99999999999999999999 kB\n"} {
		if _, err := parseMemAvailable(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add("MemAvailable:   24180344 kB\n")
	f.Add("MemAvailable: 9223372036854775807 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseMemAvailable(strings.NewReader(s)); err == nil && n < 0 {
			t.Fatalf("%q: negative %d", s, n)
		}
	})
}
