package l2trace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.UnixMicro(1_764_900_000_000_000)

func rec(i int, op Op, hit bool) Record {
	return Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Op: op, Client: "10.0.0.7:51234", Proto: "resp", Salt: "tenant-3",
		Model: "llama3-8b", KVRank: 1, Chunk: "9f0c2b6a11d3e4f5", Size: 1 << 20, Hit: hit, Latency: 85 * time.Microsecond}
}

func record(t *testing.T, o Options, recs ...Record) *Recorder {
	t.Helper()
	r, err := New(o, Header{Node: "n1", Capacity: Capacity{Slots: 100, SlotBytes: 1052672}, Eviction: "lru", Admission: "all"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range recs {
		if !r.Record(x) { // the default buffer holds every record of these tests
			t.Fatal("record dropped")
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoundTrip: what a Recorder writes, Read gives back, header first, footer counted.
func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	in := []Record{rec(0, OpGet, false), rec(1, OpSet, true), rec(2, OpGet, true), rec(3, OpExists, true), rec(4, OpDelete, true), rec(5, OpFetch, false)}
	in[5].Batch, in[5].Err, in[5].Salt = 7, `peer "n2" timed out`, "ünïcode\n"
	r := record(t, Options{Path: path}, in...)
	if s := r.Stats(); s.Records != 6 || s.Dropped != 0 || s.Files != 1 {
		t.Fatalf("stats %+v", s)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, out, dropped, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if h.Schema != Schema || h.FormatVersion != FormatVersion || h.Node != "n1" || h.Capacity.Slots != 100 || h.Eviction != "lru" || h.Redacted != "" || dropped != 0 {
		t.Fatalf("header %+v, dropped %d", h, dropped)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records, want %d", len(out), len(in))
	}
	for i := range in {
		if !out[i].Time.Equal(in[i].Time) || out[i].Op != in[i].Op || out[i].Salt != in[i].Salt || out[i].Chunk != in[i].Chunk || out[i].Hit != in[i].Hit ||
			out[i].Latency != in[i].Latency || out[i].Batch != in[i].Batch || out[i].Err != in[i].Err || out[i].KVRank != 1 || out[i].Size != 1<<20 {
			t.Errorf("record %d: %+v, want %+v", i, out[i], in[i])
		}
	}
}

// TestRotation: files end at MaxBytes, every part has a header and a footer, ReadFiles reads
// them all from the first path, and MaxFiles deletes the oldest.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.jsonl")
	var in []Record
	for i := range 100 {
		in = append(in, rec(i, OpGet, i%2 == 0))
	}
	r := record(t, Options{Path: path, MaxBytes: 2000}, in...)
	parts := Parts(path)
	if r.Stats().Files < 4 || len(parts) != r.Stats().Files {
		t.Fatalf("%d files started, parts %v", r.Stats().Files, parts)
	}
	for _, p := range parts {
		b, _ := os.ReadFile(p)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if !strings.Contains(lines[0], `"kind":"header"`) || !strings.Contains(lines[len(lines)-1], `"kind":"footer"`) || len(b) > 2000+400 {
			t.Errorf("%s: %d bytes, first %q, last %q", p, len(b), lines[0], lines[len(lines)-1])
		}
	}
	rg, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rg.Records) != 100 || len(rg.Nodes) != 1 || len(rg.Files) != len(parts) || rg.Capacity().Slots != 100 {
		t.Fatalf("%d records, %d nodes, files %v", len(rg.Records), len(rg.Nodes), rg.Files)
	}
	for i, x := range rg.Records {
		if !x.Time.Equal(in[i].Time) {
			t.Fatalf("record %d at %v, want %v", i, x.Time, in[i].Time)
		}
	}
	// Two kept: the oldest parts are gone, the rest still read.
	path2 := filepath.Join(dir, "kept.jsonl")
	r = record(t, Options{Path: path2, MaxBytes: 2000, MaxFiles: 2}, in...)
	parts = Parts(path2)
	if len(parts) != 2 || parts[1] != partPath(path2, r.Stats().Files-1) {
		t.Fatalf("kept parts %v of %d", parts, r.Stats().Files)
	}
}

// TestFullBufferDrops: Record never blocks; what the buffer cannot take is counted.
func TestFullBufferDrops(t *testing.T) {
	r := &Recorder{ch: make(chan Record, 2)} // no writer drains it
	taken := 0
	for i := range 5 {
		if r.Record(rec(i, OpGet, true)) {
			taken++
		}
	}
	if taken != 2 || r.Stats().Dropped != 3 {
		t.Fatalf("taken %d, dropped %d", taken, r.Stats().Dropped)
	}
	var nilRec *Recorder
	if nilRec.Record(rec(0, OpGet, true)) || nilRec.Close() != nil {
		t.Fatal("a nil recorder records")
	}
}

// TestRedact: tenants, models and clients are keyed hashes, the same for the same key and
// input; chunk hashes and the empty salt stay as they are.
func TestRedact(t *testing.T) {
	dir := t.TempDir()
	read := func(name string, key []byte) []Record {
		p := filepath.Join(dir, name)
		x := rec(0, OpGet, true)
		y := x
		y.Salt = ""
		record(t, Options{Path: p, Redact: true, RedactKey: key}, x, y)
		rg, err := ReadFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		if rg.Nodes[0].Redacted != "blake2b-256-keyed" {
			t.Errorf("header says redacted %q", rg.Nodes[0].Redacted)
		}
		return rg.Records
	}
	a, b, c := read("a", []byte("k1")), read("b", []byte("k1")), read("c", []byte("k2"))
	if a[0].Salt == "tenant-3" || a[0].Model == "llama3-8b" || a[0].Client == "10.0.0.7:51234" || len(a[0].Salt) != 32 {
		t.Fatalf("not redacted: %+v", a[0])
	}
	if a[0].Salt != b[0].Salt || a[0].Model != b[0].Model || a[0].Salt == c[0].Salt {
		t.Errorf("same key %q/%q, other key %q", a[0].Salt, b[0].Salt, c[0].Salt)
	}
	if a[0].Chunk != "9f0c2b6a11d3e4f5" || a[1].Salt != "" {
		t.Errorf("chunk %q, empty salt %q", a[0].Chunk, a[1].Salt)
	}
}

func TestReadRefuses(t *testing.T) {
	hdr := `{"kind":"header","schema":"rbctl-l2trace","format_version":1,"capacity":{"slots":1,"slot_bytes":4096},"eviction":"lru"}`
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"timestamp": 1, "hash_ids": [1]}`, ErrHeader},
		{strings.Replace(hdr, `"format_version":1`, `"format_version":2`, 1), ErrVersion},
		{hdr + "\n" + `{"ts_us":1,"op":"put","chunk_hash":"ab"}`, ErrRecording},
		{hdr + "\n" + `{"op":"get","chunk_hash":"ab"}`, ErrRecording},
		{hdr + "\n" + `{"ts_us":1,"op":"get"}`, ErrRecording},
		{"", ErrRecording},
	} {
		if _, _, _, err := Read(strings.NewReader(tc.in)); !errors.Is(err, tc.want) || !errors.Is(err, ErrRecording) {
			t.Errorf("%q: %v, want %v", tc.in, err, tc.want)
		}
	}
	// A file cut short (the node stopped without a footer) reads.
	if _, recs, _, err := Read(strings.NewReader(hdr + "\n" + `{"ts_us":1,"op":"get","chunk_hash":"ab"}`)); err != nil || len(recs) != 1 {
		t.Errorf("cut file: %d records, %v", len(recs), err)
	}
}

// BenchmarkRecord is what Record costs the caller (the writer runs in the background):
// go test -bench Record ./workloads/l2trace.
func BenchmarkRecord(b *testing.B) {
	r, err := New(Options{Path: filepath.Join(b.TempDir(), "rec.jsonl")}, Header{Node: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	x := rec(0, OpGet, true)
	for b.Loop() {
		r.Record(x)
	}
	b.StopTimer()
	r.Close()
	s := r.Stats()
	b.ReportMetric(float64(s.Dropped)/float64(s.Records+s.Dropped), "dropped/op")
}
