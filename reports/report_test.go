package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/ftl"
)

func sample() *Report {
	r := New("bench")
	r.Device = Device{Path: "emu:x", Kind: "emulated", SizeBytes: 1 << 30, FDP: true, Handles: 8, RUBytes: 16 << 20, OP: 0.07,
		MappingUnit: 4096, Isolation: "initially-isolated", GC: "greedy", Precondition: "trim", Deallocate: true}
	r.Workload = Workload{Name: "kv", Seed: 1, Tenants: []string{"chat", "rag"}, ChunkBytes: 1 << 20, SlotBytes: 1<<20 + 4096,
		Slots: 900, TargetUtil: 0.9, Eviction: "lru", Workers: 2}
	r.Window = Window{WarmupBytes: I64(1 << 30), MeasuredBytes: 4 << 30, Description: "after 1× warm-up"}
	for _, p := range []string{"none", "cache-salt"} {
		r.Runs = append(r.Runs, Run{Policy: p, Ops: 100, Requests: 100, ElapsedSec: 2, OpsPerSec: F64(50), ReadBytes: 1e9, WrittenBytes: 2e9,
			ReadGBps: F64(0.5), WriteGBps: F64(1), HitRatio: 0.4, DeallocatedBytes: I64(1 << 30),
			Latency: []Latency{{Op: "request", Count: 100, MeanUs: 900, P50Us: 800, P99Us: 5000, P999Us: 9000, MaxUs: 12000}},
			HostWAF: &WAF{Value: 2.1, Steady: 2.3, Source: "modelled", HostBytes: 2e9, MediaBytes: 4.2e9,
				Handles: []HandleWAF{{Handle: 3, Label: "salt chat", HostBytes: 2e9, MediaBytes: 4.2e9, RelocatedBytes: 2.2e9, HostShare: 1, WAF: 2.1}}},
			DeviceWAF:  &WAF{Value: 2.1, Source: SourceEmulatorModel, HostBytes: 2e9, MediaBytes: 4.2e9},
			Tenants:    []Tenant{{Salt: "chat", Requests: 60, BytesWritten: 1e9, HitRatio: 0.5}},
			Timeline:   []Point{{Seconds: F64(1), PayloadBytes: 1e9, OpsPerSec: F64(50), WriteGBps: F64(1), ReadGBps: F64(0.5), WAF: F64(2)}},
			RequestCDF: []CDFPoint{{Us: 800, Fraction: 0.5}, {Us: 12000, Fraction: 1}},
			LoadStart:  "0.37 1.40 1.76", LoadEnd: "1.10 1.30 1.70"})
	}
	r.Host = &Host{CPUs: 2, GOMAXPROCS: 2, Kernel: "6.18.44"}
	return r
}

func keys(m map[string]any) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// The JSON schema is a contract: these field names and types are what consumers parse.
// Adding a field is fine (add it here); renaming or removing one needs a SchemaVersion bump.
func TestJSONSchemaV1(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != Schema || doc["schema_version"] != float64(1) || SchemaVersion != 1 {
		t.Fatalf("schema %v version %v", doc["schema"], doc["schema_version"])
	}
	want := map[string][]string{
		"top":      {"command", "created", "device", "host", "interrupted", "runs", "schema", "schema_version", "window", "workload"},
		"device":   {"deallocate", "fdp", "gc", "handles", "isolation", "kind", "mapping_unit", "op", "path", "precondition", "ru_bytes", "size_bytes"},
		"workload": {"chunk_bytes", "eviction", "name", "seed", "slot_bytes", "slots", "target_util", "tenants", "workers"},
		"window":   {"description", "measured_bytes", "warmup_bytes"},
		"run": {"deallocated_bytes", "device_waf", "elapsed_seconds", "evicted", "expired", "hit_ratio", "host_waf", "latency", "ops",
			"ops_per_sec", "read_bytes", "read_gbps", "request_cdf", "requests", "policy", "store_failed", "tenants", "timeline",
			"utilisation", "write_gbps", "written_bytes", "load_start", "load_end"},
		"host":    {"cpus", "gomaxprocs", "kernel"},
		"latency": {"count", "max_us", "mean_us", "op", "p50_us", "p999_us", "p99_us"},
		"waf":     {"handles", "host_bytes", "media_bytes", "source", "steady", "value"},
		"handle":  {"handle", "label", "host_bytes", "host_share", "media_bytes", "relocated_bytes", "waf"},
		"tenant":  {"bytes_written", "evicted", "hit_ratio", "requests", "salt", "slots_held"},
		"point":   {"ops_per_sec", "payload_bytes", "read_gbps", "seconds", "waf", "waf_cum", "write_gbps"},
		"cdf":     {"fraction", "us"},
	}
	run := doc["runs"].([]any)[0].(map[string]any)
	got := map[string][]string{
		"top": keys(doc), "device": keys(doc["device"].(map[string]any)), "workload": keys(doc["workload"].(map[string]any)),
		"window": keys(doc["window"].(map[string]any)), "run": keys(run),
		"latency": keys(run["latency"].([]any)[0].(map[string]any)), "waf": keys(run["host_waf"].(map[string]any)),
		"tenant": keys(run["tenants"].([]any)[0].(map[string]any)), "point": keys(run["timeline"].([]any)[0].(map[string]any)),
		"cdf":    keys(run["request_cdf"].([]any)[0].(map[string]any)),
		"handle": keys(run["host_waf"].(map[string]any)["handles"].([]any)[0].(map[string]any)),
		"host":   keys(doc["host"].(map[string]any)),
	}
	for k := range want {
		sort.Strings(want[k])
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s fields:\n got %v\nwant %v", k, got[k], want[k])
		}
	}
	if _, ok := run["host_waf"].(map[string]any)["value"].(float64); !ok {
		t.Error("host_waf.value is not a number")
	}
	// Round trip.
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Runs[1].HostWAF.Steady != 2.3 || back.Device.RUBytes != 16<<20 {
		t.Fatalf("round trip lost data: %+v", back.Runs[1].HostWAF)
	}
}

func TestRenderers(t *testing.T) {
	r := sample()
	for _, f := range []string{"table", "markdown", "csv"} {
		var buf bytes.Buffer
		if err := Write(&buf, r, f); err != nil {
			t.Fatal(f, err)
		}
		out := buf.String()
		for _, want := range []string{"cache-salt", "2.100"} {
			if f == "csv" && want == "2.100" {
				want = "2.1"
			}
			if !strings.Contains(out, want) {
				t.Errorf("%s output lacks %q:\n%s", f, want, out)
			}
		}
	}
	// The per-handle table only on request.
	for _, on := range []bool{false, true} {
		r.PerHandle = on
		var buf bytes.Buffer
		if err := Table(&buf, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "relocated GiB"); got != on {
			t.Errorf("PerHandle %v: per-handle table printed %v:\n%s", on, got, buf.String())
		}
	}
	var buf bytes.Buffer
	CSV(&buf, r)
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 3 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("csv: %d rows, %v", len(rows), err)
	}
	if err := Write(&buf, r, "xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
	r.Command, r.Sweep = "simulate", "util"
	buf.Reset()
	if err := Table(&buf, r); err != nil || !strings.Contains(buf.String(), "util") {
		t.Fatalf("sweep table: %v\n%s", err, buf.String())
	}
}

func TestHandlesOf(t *testing.T) {
	s := ftl.Stats{HostBytes: 400, MediaBytes: 600, Handles: []ftl.HandleStats{
		{HostBytes: 300, MediaBytes: 300}, {}, {HostBytes: 100, MediaBytes: 300, RelocatedBytes: 200}, {RelocatedBytes: 0}}}
	got := HandlesOf(s, map[int]string{0: "salt a"})
	want := []HandleWAF{{Handle: 0, Label: "salt a", HostBytes: 300, MediaBytes: 300, HostShare: 0.75, WAF: 1},
		{Handle: 2, HostBytes: 100, MediaBytes: 300, RelocatedBytes: 200, HostShare: 0.25, WAF: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HandlesOf:\n got %+v\nwant %+v", got, want)
	}
}

// A bench's report says what machine it ran on and its load around each run; simulate's
// (no Host) says nothing, and a load not read is said to be not read.
func TestHostLine(t *testing.T) {
	r := sample()
	r.Runs[1].LoadEnd = ""
	for _, f := range []string{"table", "markdown"} {
		var buf bytes.Buffer
		if err := Write(&buf, r, f); err != nil {
			t.Fatal(err)
		}
		want := "host: 2 CPUs (GOMAXPROCS 2), Linux 6.18.44; load average (1, 5, 15 min) at each run's start → end: none 0.37 1.40 1.76 → 1.10 1.30 1.70, cache-salt 0.37 1.40 1.76 → not read"
		if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), want) {
			t.Errorf("%s lacks %q:\n%s", f, want, buf.String())
		}
	}
	r.Host = nil
	var buf bytes.Buffer
	if err := Table(&buf, r); err != nil || strings.Contains(buf.String(), "host:") {
		t.Fatalf("no Host: %v\n%s", err, buf.String())
	}
	r.Host = &Host{CPUs: 4, GOMAXPROCS: 1}
	for i := range r.Runs {
		r.Runs[i].LoadStart, r.Runs[i].LoadEnd = "", ""
	}
	if got := hostLine(r); got != "host: 4 CPUs (GOMAXPROCS 1)" {
		t.Fatalf("%q", got)
	}
}
