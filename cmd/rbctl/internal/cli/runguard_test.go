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
		{[]string{"simulate", "--device-size", "1T", "--isolation", "persistent", "--op", "0.01"}, []string{"needs 16 spare RUs", "this model has 5", "--op 0.04", "--ru (at most 512M)"}},
		{[]string{"simulate", "--capacity", "1T", "--isolation", "persistent", "--sweep", "op=0.01:0.1:0.03"}, []string{"sweep op=0.01: garbage collection needs 16"}},
		{[]string{"simulate", "--device-size", "1T", "--isolation", "persistent", "--reserve", "30"}, []string{"needs 45 spare RUs", "a reserve of 30"}},
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
		{"simulate", "--device-size", "64T", "--save", filepath.Join(file, "r.json")},
		{"simulate", "--device-size", "64T", "--plot", filepath.Join(file, "plots")},
		{"simulate", "--device-size", "64T", "--save", dir},
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
	_, err := runCLI(t, "simulate", "--device-size", "64T")
	if err == nil || !strings.Contains(err.Error(), "needs about") || !strings.Contains(err.Error(), "256.0 MiB available") ||
		!regexp.MustCompile(`a smaller --device-size \(about [0-9]+[TGM] fits\)`).MatchString(err.Error()) {
		t.Fatalf("64T on a 256 MiB machine: %v", err)
	}
	// Small mapping units: the FTL model dominates and a bigger --unit is the fix.
	_, err = runCLI(t, "simulate", "--device-size", "1T", "--unit", "4K")
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

// A failed run makes the command fail (exit 1) after the report names its error under the
// table; an interrupted report exits 130.
func TestOutcome(t *testing.T) {
	rep := reports.New("bench")
	rep.Runs = []reports.Run{{Policy: "none", Ops: 10}, {Policy: "cache-salt", Error: "format: device went away"}, {Policy: "hotness", Ops: 10}}
	err := outcome(rep, "bench", "policies")
	if err == nil || exitCode(context.Background(), err) != exitError || !strings.Contains(err.Error(), "bench: 1 of 3 policies failed (cache-salt)") {
		t.Fatalf("outcome %v", err)
	}
	var buf bytes.Buffer
	if err := reports.Table(&buf, rep); err != nil {
		t.Fatal(err)
	}
	end := strings.LastIndex(buf.String(), "-+\n") + len("-+\n") // the last table border
	if table, under := buf.String()[:end], buf.String()[end:]; strings.Contains(table, "cache-salt") ||
		!strings.Contains(under, "error (cache-salt): format: device went away") {
		t.Fatalf("table:\n%s", buf.String())
	}
	rep.Sweep, rep.Runs[1].Param = "util", 0.85
	if err := outcome(rep, "simulate", "runs"); err == nil || !strings.Contains(err.Error(), "(cache-salt @ util=0.85)") {
		t.Fatalf("sweep outcome %v", err)
	}
	rep.Interrupted, rep.Partial = true, "1 of 3 policies complete"
	if err := outcome(rep, "bench", "policies"); !errors.Is(err, errInterrupted) || exitCode(context.Background(), err) != exitInterrupted {
		t.Fatalf("interrupted outcome %v", err)
	}
}
