package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports"
)

const cliTrace = `{"timestamp": 0, "input_length": 2048, "output_length": 1, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 10, "input_length": 2600, "output_length": 1, "hash_ids": [1, 2, 3, 4, 5, 6]}
{"timestamp": 20, "input_length": 1024, "output_length": 1, "hash_ids": [9, 10]}
{"timestamp": 30, "input_length": 3000, "output_length": 1, "hash_ids": [1, 2, 3, 4, 5, 6]}
`

func writeCLITrace(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// simulate --workload mooncake:FILE reports the trace, each admission policy's run with
// its tokens saved, and draws the hit ratio over the trace.
func TestSimulateMooncake(t *testing.T) {
	path, dir := writeCLITrace(t, cliTrace), t.TempDir()
	out, err := runCLI(t, "simulate", "--workload", "mooncake:"+path, "--model", "tiny", "--device-size", "1G", "--placement", "none,hotness",
		"--admission", "all,prefix-depth:4", "--json", "--plot", dir)
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Trace == nil || r.Trace.Requests != 4 || r.Trace.BlockRefs != 18 || r.Trace.DistinctBlocks != 8 || len(r.Runs) != 4 {
		t.Fatalf("trace %+v, %d runs", r.Trace, len(r.Runs))
	}
	// all: request 2 hits blocks 1-4 (2048 tokens) and stores blocks 5 and 6, of which 6
	// holds 40 tokens (one chunk); request 4 hits blocks 1-5 and that chunk of block 6
	// (2560 + 256 tokens), not the chunk its 440 tokens of block 6 add.
	if run := r.Runs[0]; run.Admission != "all" || run.Trace == nil || run.Trace.TokensSaved != 2048+2816 || run.Trace.BlocksHit != 4+5 {
		t.Fatalf("run %+v trace %+v", run, run.Trace)
	}
	// prefix-depth:4: only the first 4 chunks (2 blocks) of a prompt are stored.
	if run := r.Runs[2]; run.Admission != "prefix-depth:4" || run.Trace.TokensSaved != 8*256 {
		t.Fatalf("run %+v trace %+v", run, run.Trace)
	}
	if _, err := os.Stat(filepath.Join(dir, "hit-ratio-over-time.png")); err != nil {
		t.Fatal(err)
	}
	if out, err = runCLI(t, "simulate", "--workload", "mooncake:"+path, "--model", "tiny", "--device-size", "1G", "--placement", "none"); err != nil ||
		!strings.Contains(out, "trace: 4 requests, 18 block references (8 distinct)") || !strings.Contains(out, "flash KiB/tok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// A malformed trace, a chunk size that does not divide a block, and bad rule, speed,
// admission or model config values are refused before anything runs.
func TestMooncakeRefused(t *testing.T) {
	good := writeCLITrace(t, cliTrace)
	bad := writeCLITrace(t, cliTrace+`{"timestamp": 40, "input_length": 10, "hash_ids": [1, "x"]}`+"\n")
	cfg := writeCLITrace(t, `{"num_hidden_layers": 2}`)
	base := []string{"simulate", "--model", "tiny", "--device-size", "1G", "--placement", "none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "mooncake:" + bad}, "line 5"},
		{[]string{"--workload", "mooncake:" + good, "--chunk-tokens", "384"}, "do not divide"},
		{[]string{"--workload", "mooncake:" + good, "--salt-by", "conversation"}, "salt rule"},
		{[]string{"--workload", "mooncake:" + good, "--speed", "-1"}, "speed"},
		{[]string{"--workload", "mooncake:" + good, "--admission", "all,sometimes"}, "admission"},
		{[]string{"--workload", "mooncake:" + good, "--model-config", cfg}, "KV heads"},
		{[]string{"--workload", "mooncake:" + filepath.Join(t.TempDir(), "none.jsonl")}, "no such file"},
	} {
		out, err := runCLI(t, append(base, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("%v: %v (want %q)\n%s", tc.args, err, tc.want, out)
		}
	}
}

// bench replays a trace whole unless --duration is given; a trace cut short by --duration
// says so (replayed 100 times slower, request 2 starts 1 s in, after a 300 ms window).
func TestBenchMooncakeRunsWhole(t *testing.T) {
	path := writeCLITrace(t, cliTrace)
	args := []string{"bench", "mem:256M", "--workload", "mooncake:" + path, "--model", "tiny", "--placement", "none", "--json", "--quiet"}
	for _, tc := range []struct {
		extra []string
		cut   bool
	}{{nil, false}, {[]string{"--speed", "0.01", "--duration", "300ms"}, true}} {
		out, err := runCLI(t, append(args, tc.extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r reports.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(r.Runs) != 1 {
			t.Fatalf("%d runs", len(r.Runs))
		}
		note := r.Runs[0].Note
		if cut := strings.Contains(note, "the trace was cut by the 300ms duration after"); cut != tc.cut {
			t.Fatalf("%v: cut %v, want %v; notes:\n%s", tc.extra, cut, tc.cut, note)
		}
		if n := r.Runs[0].Requests; (!tc.cut && n != 4) || (tc.cut && n >= 4) {
			t.Errorf("%v: %d requests measured", tc.extra, n)
		}
		// The note gives the ceiling of the requests replayed: one request hits nothing.
		if tc.cut && r.Runs[0].Requests == 1 && !strings.Contains(note, "the ceiling of those is 0.00 % of chunks") {
			t.Errorf("cut note without the window's ceiling: %s", note)
		}
	}
}
