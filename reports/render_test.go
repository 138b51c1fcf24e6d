package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/workloads"
)

// maxWidth is the widest line a table may print (the demo's terminal budget).
const maxWidth = TextWidth

func lines(t *testing.T, r *Report, format string) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, r, format); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
}

// A failed run leaves the table and its error goes under it; no cell carries an error or a
// note, and every line fits 160 columns, with the longest policy names and every column.
func TestTableErrorsUnderTable(t *testing.T) {
	r := sample()
	long := "request op: emu:out/demo/emu-fdp.img?size=512M&ru=8M&ruhs=8&op=0.07 [235802624, 236064768): nvme Write: ftl: infeasible: garbage collection cannot free space"
	r.Runs[0].Policy = "metadata-class+cache-salt:hash"
	r.Runs = append(r.Runs, Run{Policy: "metadata-class+cache-salt", Error: long, OpsPerSec: F64(12345), HostWAF: &WAF{Value: 9.99, Source: SourceModelled}})
	r.Runs[1].Note = "warm-up timed out before the target was stored; " + long
	r.PerHandle = true
	out := lines(t, r, "table")
	inTable, errLine, noteLine := false, false, false
	for _, l := range out {
		if n := len(l); n > maxWidth {
			t.Errorf("line of %d bytes (> %d):\n%s", n, maxWidth, l)
		}
		cell := strings.HasPrefix(l, "|") || strings.HasPrefix(l, "+")
		if cell && (strings.Contains(l, "infeasible") || strings.Contains(l, "error") || strings.Contains(l, "warm-up")) {
			t.Errorf("error or note inside a table cell:\n%s", l)
		}
		if cell && strings.Contains(l, "9.990") {
			inTable = true
		}
		errLine = errLine || strings.HasPrefix(l, "error (metadata-class+cache-salt): request op:")
		noteLine = noteLine || strings.HasPrefix(l, "note (cache-salt): warm-up timed out")
	}
	if inTable || !errLine || !noteLine {
		t.Fatalf("failed run in table %v, error line %v, note line %v:\n%s", inTable, errLine, noteLine, strings.Join(out, "\n"))
	}
	// Markdown the same way; JSON keeps the failed run with its error.
	md := strings.Join(lines(t, r, "markdown"), "\n")
	if strings.Contains(md, "| metadata-class+cache-salt |") || !strings.Contains(md, "_error (metadata-class+cache-salt): request op") {
		t.Fatalf("markdown:\n%s", md)
	}
	var doc Report
	if err := json.Unmarshal([]byte(strings.Join(lines(t, r, "json"), "\n")), &doc); err != nil || len(doc.Runs) != 3 || doc.Runs[2].Error != long {
		t.Fatalf("json lost the failed run: %v %+v", err, doc.Runs)
	}
}

// The device WAF column says where its figures came from: the emulator's log is model output.
func TestDeviceWAFSourceLabels(t *testing.T) {
	for _, tc := range []struct {
		source, header string
		fdp            bool
	}{
		{SourceEmulatorModel, "emulator WAF (model)", true},
		{SourceFDPStats, "device WAF (FDP log)", true},
		{"", "", false},
	} {
		r := sample()
		r.Device.FDP = tc.fdp
		for i := range r.Runs {
			r.Runs[i].DeviceWAF = nil
			if tc.source != "" {
				r.Runs[i].DeviceWAF = &WAF{Value: 1.5, Source: tc.source}
			}
		}
		out := strings.Join(lines(t, r, "table"), "\n")
		if tc.header != "" && !strings.Contains(out, tc.header) {
			t.Errorf("source %q: no %q column:\n%s", tc.source, tc.header, out)
		}
		if tc.source == SourceEmulatorModel && strings.Contains(out, "FDP log") {
			t.Errorf("emulator figures labelled as an FDP log:\n%s", out)
		}
		if tc.source == "" && (strings.Contains(out, "device WAF") || strings.Contains(out, "emulator WAF")) {
			t.Errorf("no device WAF, but a column for it:\n%s", out)
		}
		csvOut := strings.Join(lines(t, r, "csv"), "\n")
		if tc.source != "" && !strings.Contains(csvOut, ","+tc.source+",") {
			t.Errorf("csv lacks the source %q:\n%s", tc.source, csvOut)
		}
	}
}

// A figure that was not measured is "-" in tables, empty in CSV and null in JSON, never 0.
func TestUnmeasuredFigures(t *testing.T) {
	r := New("simulate")
	r.Device = Device{Kind: "model", SizeBytes: 1 << 40}
	r.Runs = []Run{{Policy: "none", Ops: 10, WrittenBytes: 1 << 30, HostWAF: &WAF{Value: 1.9, Source: SourceModelled},
		Timeline: []Point{{PayloadBytes: 1 << 30, WAF: F64(1.9), CumWAF: F64(1.9)}}}}
	rows, err := csv.NewReader(strings.NewReader(strings.Join(lines(t, r, "csv"), "\n"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]string{}
	for i, h := range rows[0] {
		col[h] = rows[1][i]
	}
	for _, k := range []string{"ops_per_sec", "read_gbps", "write_gbps", "deallocated_bytes", "device_waf"} {
		if col[k] != "" {
			t.Errorf("csv %s = %q, want empty (not measured)", k, col[k])
		}
	}
	if col["host_waf"] != "1.9" || col["interrupted"] != "false" {
		t.Errorf("csv host_waf %q interrupted %q", col["host_waf"], col["interrupted"])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.Join(lines(t, r, "json"), "\n")), &doc); err != nil {
		t.Fatal(err)
	}
	run := doc["runs"].([]any)[0].(map[string]any)
	pt := run["timeline"].([]any)[0].(map[string]any)
	for k, v := range map[string]any{"ops_per_sec": run["ops_per_sec"], "deallocated_bytes": run["deallocated_bytes"],
		"read_gbps": run["read_gbps"], "window.warmup_bytes": doc["window"].(map[string]any)["warmup_bytes"],
		"timeline.seconds": pt["seconds"], "timeline.ops_per_sec": pt["ops_per_sec"]} {
		if v != nil {
			t.Errorf("json %s = %v, want null", k, v)
		}
	}
	// A bench run whose model gave up has no host WAF: "-", not a figure.
	b := sample()
	b.Runs[0].HostWAF, b.Runs[0].Infeasible = nil, true
	for _, l := range lines(t, b, "table") {
		if strings.HasPrefix(l, "| none ") && !strings.Contains(l, "request") && (strings.Count(l, "2.100") != 1 || strings.Contains(l, "2.300")) {
			t.Errorf("run without host WAF shows one (only the device's 2.100 may appear):\n%s", l)
		}
	}
	// One that says why shows it in the modelled cells ("no model"; the note has the why).
	b.Runs[0].NoModel = "no host WAF estimate: garbage collection needs 9 spare RUs"
	found := false
	for _, l := range lines(t, b, "table") {
		if strings.HasPrefix(l, "| none ") && !strings.Contains(l, "request") {
			found = found || strings.Count(l, "no model") == 2
		}
	}
	if !found {
		t.Error("a run without a model that says why shows no \"no model\" cells")
	}
}

func TestInterruptedMark(t *testing.T) {
	r := sample()
	r.Interrupted, r.Partial = true, "cache-salt stopped after 1.2 s of 5s"
	r.Runs[1].Interrupted = true
	out := lines(t, r, "table")
	if last := out[len(out)-1]; last != "interrupted: partial result (cache-salt stopped after 1.2 s of 5s)" {
		t.Fatalf("last line %q", last)
	}
	js := strings.Join(lines(t, r, "json"), "\n")
	if !strings.Contains(js, `"interrupted": true`) || !strings.Contains(js, `"partial": "cache-salt stopped`) {
		t.Fatalf("json lacks the mark:\n%s", js)
	}
	r.Interrupted = false
	if js := strings.Join(lines(t, r, "json"), "\n"); !strings.Contains(js, `"interrupted": false`) {
		t.Fatal("a complete report must say interrupted: false")
	}
}

func TestWrapKeepsLinesWithinWidth(t *testing.T) {
	s := strings.Repeat("word ", 100) + strings.Repeat("x", 200)
	lines := Wrap(s, 40, "  ")
	if strings.Join(strings.Fields(strings.Join(lines, " ")), " ") != strings.Join(strings.Fields(s), " ") {
		t.Fatalf("wrap lost or changed words: %q", lines)
	}
	for i, l := range lines {
		if len(l) > 40 && !strings.HasSuffix(l, strings.Repeat("x", 200)) {
			t.Errorf("line %d is %d bytes: %q", i, len(l), l)
		}
		if i > 0 && !strings.HasPrefix(l, "  ") {
			t.Errorf("continuation line %d not indented: %q", i, l)
		}
	}
}

// Every line of a rendered report, tables included, fits TextWidth bytes.
func TestTableOutputWithinTextWidth(t *testing.T) {
	r := New("bench")
	r.Device = Device{Path: "emu:" + strings.Repeat("/long/path", 10) + "?size=512M&ru=8M&ruhs=8&op=0.15&iso=initial", Kind: "emulated"}
	r.Notes = []string{strings.Repeat("a long note that goes on ", 20)}
	r.Runs = []Run{{Policy: "metadata-class+cache-salt", Note: strings.Repeat("and on ", 40)}}
	var b bytes.Buffer
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(b.String(), "\n") {
		if len(l) > TextWidth {
			t.Errorf("line %d is %d bytes: %q", i, len(l), l)
		}
	}
}

// TestTraceTableWithoutModel: a bench trace run whose shadow model could not run shows the
// host bytes it measured and "no model" where a model's figure would be.
func TestTraceTableWithoutModel(t *testing.T) {
	r := sample()
	r.Trace = &workloads.TraceStats{Requests: 10, BlockRefs: 40, ChunkTokens: 256, ChunkRefs: 80, CeilingChunks: 20}
	run := &r.Runs[0]
	run.HostWAF, run.DeviceWAF, run.Infeasible = nil, nil, true
	run.NoModel, run.HostBytes = "no host WAF estimate: 9 spare RUs needed, 8 present", I64(3<<30)
	run.Trace = &TraceRun{TokensRequested: 100, TokensSaved: 50, PrefixHits: make([]int64, 6)}
	h, rows := perTrace(r)
	row := rows[0]
	cell := func(name string) string { return row[slices.Index(h, name)] }
	if cell("host GiB") != "3.00" || cell("flash GiB") != "no model" || cell("flash KiB/tok") != "no model" {
		t.Fatalf("row %q", row)
	}
}

// TestQueueTables: a bench run with a queue shows its depth percentiles and histogram, and
// one row per interval ("-" where no op finished); a run without one shows neither.
func TestQueueTables(t *testing.T) {
	r := sample()
	out := strings.Join(lines(t, r, "table"), "\n")
	if strings.Contains(out, "QD p50") {
		t.Fatal("queue tables without a queue")
	}
	r.Runs[0].Queue = &workloads.QueueStats{Ops: 3, Seconds: 2, P50: 1, P90: 2, P99: 2, Max: 2,
		Depth:     []workloads.DepthShare{{Min: 0, Max: 0, Share: 0.25}, {Min: 1, Max: 1, Share: 0.5}, {Min: 2, Max: 3, Share: 0.25}},
		Intervals: []workloads.QueueInterval{{EndSeconds: 1, MeanDepth: 1.5, MaxDepth: 2}, {EndSeconds: 2, Ops: 3, MeanDepth: 0.5, MaxDepth: 1, P50Us: 900, P99Us: 1500}}}
	out = strings.Join(lines(t, r, "table"), "\n")
	for _, want := range []string{"QD p50", "0: 25.0%, 1: 50.0%, 2-3: 25.0%", "| none   | 1.00    | 0        | 1.50    | 2      | -     | -      |", "note: queue depth (QD)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
