package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/reports"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestSimulateJSON(t *testing.T) {
	dir := t.TempDir()
	out, err := runCLI(t, "simulate", "--device-size", "4G", "--model", "tiny", "--placement", "none,cache-salt",
		"--measure", "2", "--json", "--plot", dir)
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Schema != reports.Schema || len(r.Runs) != 2 || r.Runs[0].HostWAF == nil || r.Runs[0].HostWAF.Value < 1 {
		t.Fatalf("report: %+v", r)
	}
	if r.Runs[0].HostWAF.Source != "modelled" || r.Device.Kind != "model" {
		t.Fatalf("WAF source %q, device kind %q", r.Runs[0].HostWAF.Source, r.Device.Kind)
	}
	if _, err := os.Stat(filepath.Join(dir, "waf-over-time.png")); err != nil {
		t.Fatal(err)
	}
}

// An oracle reference runs from the CLI, replays the same op stream (same bytes written) and
// is named in the report.
func TestSimulateOracle(t *testing.T) {
	out, err := runCLI(t, "simulate", "--device-size", "4G", "--model", "tiny", "--placement", "cache-salt,oracle:salt-lifetime",
		"--measure", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Runs) != 2 || r.Runs[1].Policy != "oracle:salt-lifetime" || r.Runs[1].HostWAF == nil {
		t.Fatalf("runs: %+v", r.Runs)
	}
	if a, b := r.Runs[0].WrittenBytes, r.Runs[1].WrittenBytes; a != b || a == 0 {
		t.Fatalf("written bytes %d (cache-salt) vs %d (oracle): the oracle must replay the same stream", a, b)
	}
	// Per-handle breakdown: cache-salt spreads the three tenants over three handles whose
	// host bytes add up to the run's.
	hs := r.Runs[0].HostWAF.Handles
	var sum uint64
	for _, h := range hs {
		sum += h.HostBytes
	}
	if len(hs) < 3 || sum != r.Runs[0].HostWAF.HostBytes {
		t.Fatalf("cache-salt per-handle: %+v (sum %d, run %d host bytes)", hs, sum, r.Runs[0].HostWAF.HostBytes)
	}
	out, err = runCLI(t, "simulate", "--capacity", "1G", "--model", "tiny", "--placement", "cache-salt", "--measure", "0.5", "--per-handle")
	if err != nil || !strings.Contains(out, "relocated GiB") {
		t.Fatalf("--per-handle: %v\n%s", err, out)
	}
}

func TestSimulateSweep(t *testing.T) {
	dir := t.TempDir()
	out, err := runCLI(t, "simulate", "--capacity", "2G", "--model", "tiny", "--placement", "none,cache-salt",
		"--warmup", "0.5", "--measure", "1", "--sweep", "util=0.6:0.8:0.1", "--csv", "--plot", dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count([]byte(out), []byte("\n")); n != 1+3*2 {
		t.Fatalf("csv has %d lines, want header + 3 values × 2 policies:\n%s", n, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep-util.svg")); err != nil {
		t.Fatal(err)
	}
}

func TestSimulateFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--sweep", "util=0.9:0.5:0.1"},
		{"simulate", "--sweep", "frob=1:2:1"},
		{"simulate", "--placement", "bogus"},
		{"simulate", "--placement", "none,oracle:nope"},
		{"simulate", "--handles", "1", "--placement", "oracle:lifetime"},
		{"simulate", "--model", "nope"},
		{"simulate", "--util", "1.5"},
		{"simulate", "--eviction", "regions"},
		{"simulate", "--eviction", "lru", "--region", "2G"},
		{"simulate", "--eviction", "region", "--region", "1k", "--model", "tiny"},
		{"simulate", "--json", "--csv", "--capacity", "1G", "--model", "tiny", "--measure", "0.1", "--warmup", "0.1"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestWriteTraceAndReplay(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "w.jsonl")
	if _, err := runCLI(t, "simulate", "--model", "tiny", "--requests", "200", "--write-trace", trace); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "simulate", "--workload", "trace:"+trace, "--trace-loops", "50", "--capacity", "1G",
		"--placement", "none", "--warmup", "0.2", "--measure", "0.5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Runs[0].Requests == 0 {
		t.Fatalf("replay: %v %s", err, out)
	}
}

// Region eviction from the CLI: regions default to the model's reclaim unit, the report
// says so, and with cache-salt nothing is relocated where per-chunk LRU does relocate.
func TestSimulateRegionEviction(t *testing.T) {
	waf := map[string]float64{}
	for _, ev := range []string{"lru", "region"} {
		out, err := runCLI(t, "simulate", "--device-size", "4G", "--model", "tiny", "--bytes-per-token", "512", "--ru", "8M",
			"--placement", "none,metadata-class+cache-salt", "--util", "0.95", "--measure", "2", "--eviction", ev, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r reports.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if r.Workload.Eviction != ev || len(r.Runs) != 2 {
			t.Fatalf("%s: workload %+v, %d runs", ev, r.Workload, len(r.Runs))
		}
		if want := float64(r.Device.RUBytes) / float64(r.Workload.SlotBytes); ev == "region" && r.Workload.RegionSlots != want {
			t.Fatalf("region slots %g, want RU/slot = %g", r.Workload.RegionSlots, want)
		}
		for _, run := range r.Runs {
			waf[ev+"/"+run.Policy] = run.HostWAF.Value
		}
	}
	t.Logf("modelled WAF: %v", waf)
	if w := waf["region/metadata-class+cache-salt"]; w > 1.02 || waf["lru/metadata-class+cache-salt"] < w+0.02 {
		t.Fatalf("cache-salt WAF: region %.3f, lru %.3f; want region ≤ 1.02 and below lru", w, waf["lru/metadata-class+cache-salt"])
	}
}

// The old flag names stay accepted, hidden: simulate --capacity is --device-size and
// bench --size is --create; neither shows in help.
func TestRenamedFlagsKeepTheirOldNames(t *testing.T) {
	out, err := runCLI(t, "simulate", "--capacity", "2G", "--model", "tiny", "--placement", "none", "--warmup", "0.1", "--measure", "0.1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Device.SizeBytes != 2<<30 {
		t.Fatalf("--capacity 2G: %v, device size %d", err, r.Device.SizeBytes)
	}
	img := filepath.Join(t.TempDir(), "b.img")
	if _, err := runCLI(t, "bench", img, "--size", "64M", "--ru", "1M", "--op", "0.2", "--duration", "0", "--warmup", "0",
		"--requests", "50", "--placement", "none", "--io-engine", "posix", "--json", "--quiet"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(img); err != nil || st.Size() != 64<<20 {
		t.Fatalf("bench --size 64M: %v", err)
	}
	for cmd, old := range map[string]string{"simulate": "capacity", "bench": "size"} {
		help, _ := runCLI(t, cmd, "--help")
		if strings.Contains(help, "--"+old+" ") {
			t.Errorf("%s --help shows --%s", cmd, old)
		}
	}
}

// --lmcache-config runs the config's placement alone, or first when --placement is given;
// a config LMCache would refuse is refused before anything runs.
func TestSimulateLMCacheConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lmcache.json")
	if err := os.WriteFile(cfg, []byte(`{"type":"raw_block","device_path":"/dev/ng0n1","slot_bytes":1048576,"use_uring_cmd":true,
		"io_engine":"io_uring","fdp_enabled":true,"fdp_placement_ids":[2,3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"simulate", "--device-size", "1G", "--model", "tiny", "--measure", "1", "--preset", "workers:2", "--lmcache-config", cfg, "--json"}
	for _, tc := range []struct {
		extra []string
		runs  []string
	}{
		{nil, []string{"lmcache:cache_salt_prefix"}},
		{[]string{"--placement", "none"}, []string{"lmcache:cache_salt_prefix", "none"}},
	} {
		out, err := runCLI(t, append(base, tc.extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r reports.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var got []string
		for _, run := range r.Runs {
			got = append(got, run.Policy)
		}
		if strings.Join(got, ",") != strings.Join(tc.runs, ",") || r.Runs[0].HostWAF == nil {
			t.Fatalf("%v: runs %v, want %v", tc.extra, got, tc.runs)
		}
	}
	if err := os.WriteFile(cfg, []byte(`{"type":"raw_block","device_path":"/dev/ng0n1","slot_bytes":1048576,"use_uring_cmd":true,"io_engine":"io_uring","fdp_enabled":true,"fdp_placement_ids":[9]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, base...); err == nil || !strings.Contains(err.Error(), "fdp_placement_ids") || out != "" {
		t.Fatalf("placement id 9 on 8 handles: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "simulate", "--lmcache-config", filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "--lmcache-config") {
		t.Fatalf("absent config: %v", err)
	}
}

// Every parameter simulate sweeps takes the range of the flag that sets it alone: a point
// outside it is refused when --sweep is parsed, one inside is accepted.
func TestSweepPointsTakeTheirFlagsRange(t *testing.T) {
	for _, tc := range []struct{ good, bad string }{
		{"util=0.5:1:0.25", "util=0.5:1.5:0.25"},
		{"op=0:0.9:0.3", "op=0.5,0.95"},
		{"ru=4K,1G", "ru=2K,1G"},
		{"size=1M,1T", "size=512K,1G"},
	} {
		cmd, _, err := NewRoot().Find([]string{"simulate"})
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(tc.good, "=")
		f := cmd.Flags().Lookup(flagsets.SweepFlags[name])
		if f == nil {
			t.Fatalf("sweep %s: no flag %q", name, flagsets.SweepFlags[name])
		}
		if _, ok := ruleFor(cmd, f); !ok {
			t.Errorf("sweep %s: --%s has no rule", name, f.Name)
		}
		if err := cmd.Flags().Set("sweep", tc.good); err != nil {
			t.Errorf("--sweep %s: %v", tc.good, err)
		}
		if err := cmd.Flags().Set("sweep", tc.bad); err == nil || !strings.Contains(err.Error(), "as --"+f.Name+" takes") {
			t.Errorf("--sweep %s: %v, want the range of --%s", tc.bad, err, f.Name)
		}
	}
}
