package main

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every file under docs/results is made by a job of the manifest (or is the manifest, the
// README, or what the runner itself writes), and every job's command expands at full and
// quick scale.
func TestManifestCoversDocsResults(t *testing.T) {
	m, err := Load("../../docs/results/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := m.Expand(1, "OUT", "TMP", "DATA", nil)
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	for _, r := range runs {
		for _, o := range r.Outputs {
			made[o] = true
		}
		if r.Args[0] != "simulate" && r.Args[0] != "bench" {
			t.Errorf("job %s runs %q", r.Job.Name, r.Args[0])
		}
		if !slices.ContainsFunc(r.Args, func(a string) bool { return strings.HasPrefix(a, "OUT/") }) {
			t.Errorf("job %s writes nothing under {out}: %v", r.Job.Name, r.Args)
		}
	}
	own := []string{"README.md", "manifest.json", "spread.json", "spread.md", "results-run.json"}
	err = filepath.WalkDir("../../docs/results", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("../../docs/results", p)
		if !made[filepath.ToSlash(rel)] && !slices.Contains(own, rel) {
			t.Errorf("docs/results/%s: no job of the manifest makes it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expand(0.1, "OUT", "TMP", "DATA", nil); err != nil {
		t.Fatalf("quick scale: %v", err)
	}
}

func TestScaleArgs(t *testing.T) {
	got, err := scaleArgs(strings.Fields("simulate --device-size 1T --ru 2G --measure 4 --save x"), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "simulate --device-size 64G --ru 128M --measure 0.4 --save x --warmup 0.1"; strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	got, err = scaleArgs(strings.Fields("bench emu:x --requests 2500 --duration 0 --warmup 1"), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "bench emu:x --requests 250 --duration 0 --warmup 0.1"; strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if a, err := splitArgs(`bench "emu:a b?x=1&y=2" --q`); err != nil || len(a) != 3 || a[1] != "emu:a b?x=1&y=2" {
		t.Errorf("splitArgs: %q %v", a, err)
	}
	if _, err := splitArgs(`bench "emu`); err == nil {
		t.Error("unbalanced quote accepted")
	}
}
