package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/reports"
)

// A short bench end to end on a memory device: every policy formats, runs and reports a
// modelled WAF; without FDP there is no device WAF.
func TestBenchMemDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine for a few seconds")
	}
	out, err := runCLI(t, "bench", "mem:96M", "--ru", "2M", "--duration", "1s", "--warmup", "0.05", "--warmup-timeout", "2s",
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
		if run.Requests == 0 || len(run.Latency) == 0 || run.DeallocatedBytes == 0 {
			t.Fatalf("%s: requests %d, %d latency rows, %d B deallocated", run.Policy, run.Requests, len(run.Latency), run.DeallocatedBytes)
		}
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

func TestBenchWindowDesc(t *testing.T) {
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
		if got := benchWindowDesc(1, time.Minute, tc.d, tc.req); !strings.Contains(got, tc.want) {
			t.Errorf("duration %s, requests %d: %q lacks %q", tc.d, tc.req, got, tc.want)
		}
	}
}
