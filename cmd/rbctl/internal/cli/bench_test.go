package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/reports"
)

// A short bench end to end on a memory device: every policy formats, runs and reports a
// modelled WAF; without FDP there is no device WAF. Deallocated bytes are measured (not
// null) but may be 0: a freed slot reused before its batched deallocate went out has that
// deallocate cancelled (docs/engine.md, "Deallocation").
func TestBenchMemDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine for a few seconds")
	}
	out, err := runCLI(t, "bench", "mem:96M", "--ru", "2M", "--op", "0.2", "--duration", "1s", "--warmup", "0.05", "--warmup-timeout", "2s",
		"--requests", "150", "--placement", "none,metadata-class+cache-salt", "--workers", "2", "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Runs) != 2 {
		t.Fatalf("%d runs", len(r.Runs))
	}
	for _, run := range r.Runs {
		if run.Error != "" || run.HostWAF == nil || run.HostWAF.HostBytes == 0 || run.DeviceWAF != nil {
			t.Fatalf("%s: %+v", run.Policy, run)
		}
		if run.Requests == 0 || len(run.Latency) == 0 || run.DeallocatedBytes == nil || run.OpsPerSec == nil {
			t.Fatalf("%s: requests %d, %d latency rows, deallocated %v, ops/s %v", run.Policy, run.Requests, len(run.Latency), run.DeallocatedBytes, run.OpsPerSec)
		}
	}
	if r.Interrupted || r.Window.WarmupBytes != nil {
		t.Fatalf("interrupted %v, warm-up bytes %v (bench does not measure one for the report)", r.Interrupted, r.Window.WarmupBytes)
	}
}

func TestBenchRefusesDevicesAndBadPolicies(t *testing.T) {
	if _, err := runCLI(t, "bench", "/dev/null", "--duration", "1s"); err == nil {
		t.Error("/dev/null accepted without --force")
	}
	if _, err := runCLI(t, "bench", "mem:64M", "--placement", "frob"); err == nil {
		t.Error("unknown policy accepted")
	}
}

// Region eviction through the real engine on the emulated FDP SSD: regions are sized from
// the device's reclaim unit, and with cache-salt the emulator's FDP log (its FTL model)
// shows no GC.
func TestBenchRegionEvictionOnEmulatedSSD(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on the emulator for a few seconds")
	}
	// 128 RUs + 8 % spare = 138: 10 spare RUs, one more than 8 initially isolated handles need.
	dev := "emu:" + t.TempDir() + "/e.img?size=128M&ru=1M&ruhs=8&op=0.08"
	out, err := runCLI(t, "bench", dev, "--model", "tiny", "--bytes-per-token", "512", "--placement", "none,metadata-class+cache-salt",
		"--requests", "2500", "--duration", "0", "--warmup", "1", "--util", "0.95", "--eviction", "region", "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := float64(1<<20) / float64(r.Workload.SlotBytes); r.Workload.Eviction != "region" || r.Workload.RegionSlots != want {
		t.Fatalf("workload %+v: want region eviction with RU/slot = %g chunks per region", r.Workload, want)
	}
	waf := map[string]float64{}
	for _, run := range r.Runs {
		if run.DeviceWAF == nil || run.Evicted == 0 || run.DeviceWAF.Source != reports.SourceEmulatorModel {
			t.Fatalf("%s: device WAF %+v, %d evicted", run.Policy, run.DeviceWAF, run.Evicted)
		}
		waf[run.Policy] = run.DeviceWAF.Value
	}
	t.Logf("emulator WAF (its FTL model's FDP log): %v", waf)
	if cs, none := waf["metadata-class+cache-salt"], waf["none"]; cs > 1.02 || none < cs+0.1 {
		t.Fatalf("device WAF: cache-salt %.3f (want ≤ 1.02), none %.3f (want well above)", cs, none)
	}
}

func TestBenchEvictionFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "mem:64M", "--eviction", "random"},
		{"bench", "mem:64M", "--eviction", "lru", "--region", "8M"},
		{"bench", "mem:64M", "--ru", "2M", "--eviction", "region", "--region", "4k"},
		{"bench", "mem:64M", "--ru", "32M", "--op", "0.5", "--eviction", "region"}, // a region > half the cache
	} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "region") && !strings.Contains(err.Error(), "eviction") {
			t.Errorf("%v: err %v", args, err)
		}
	}
}

// Two files hold one cache: the JSON report has a row per device and their total; the same
// file given twice (under two names) is refused before anything is created.
func TestBenchSeveralDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine for a few seconds")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	if _, err := runCLI(t, "bench", a, b, filepath.Join(dir, ".", "a.img"), "--create", "64M", "--duration", "1s"); !errors.Is(err, devices.ErrSameDevice) {
		t.Fatalf("a.img twice: %v, want ErrSameDevice", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused bench left %d files", len(ents))
	}
	out, err := runCLI(t, "bench", a, b, "--create", "64M", "--ru", "1M", "--op", "0.2", "--duration", "1s", "--warmup", "0",
		"--requests", "150", "--placement", "none", "--io-engine", "posix", "--shard-by", "kv-rank", "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	run := r.Runs[0]
	if len(run.Devices) != 2 || run.Devices[0].Device != a || run.Devices[1].Device != b || run.DevicesTotal == nil {
		t.Fatalf("devices %+v, total %v", run.Devices, run.DevicesTotal)
	}
	// kv-rank: the chunks are spread over ranks 0 and 1, one device each.
	if d := run.Devices; d[0].Ops == 0 || d[1].Ops == 0 || d[0].Errors+d[1].Errors != 0 || d[0].PutBytes+d[1].PutBytes != run.WrittenBytes {
		t.Fatalf("kv-rank rows %+v, run wrote %d bytes", d, run.WrittenBytes)
	}
	if _, err := runCLI(t, "bench", a, b, "--shard-by", "modulo", "--duration", "1s"); err == nil || !strings.Contains(err.Error(), "modulo") {
		t.Fatalf("--shard-by modulo: %v", err)
	}
	if _, err := runCLI(t, "bench", a, b, "--shard-by", "", "--duration", "1s"); err == nil || !strings.Contains(err.Error(), "--shard-by is empty") {
		t.Fatalf("--shard-by '': %v (an empty route must be refused, not taken as hash)", err)
	}
	// The same two files from an LMCache config (per_tp_device_paths): its placement alone.
	conf := filepath.Join(dir, "lmcache.json")
	body := `{"extra_config":{"rust_raw_block.per_tp_device_paths":{"0":"` + a + `","1":"` + b + `"},"rust_raw_block.slot_bytes":1052672,"rust_raw_block.meta_total_bytes":4194304}}`
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "bench", "--lmcache-config", conf, "--force", "--ru", "1M", "--op", "0.2", "--duration", "1s", "--warmup", "0",
		"--requests", "100", "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	r = reports.Report{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Runs) != 1 || r.Runs[0].Policy != "lmcache:none" || len(r.Runs[0].Devices) != 2 || r.Runs[0].Devices[1].Ops == 0 {
		t.Fatalf("--lmcache-config runs: %+v", r.Runs)
	}
}
