package probe

import (
	"errors"
	"strings"
	"testing"
)

func TestCompareJSONTrees(t *testing.T) {
	ref := `{"n":1,"stats":{"hbmw":"0x10","mbmw":340282366920938463463374607431768211455},"ruhss":[{"pid":0},{"pid":1}],"mn":"QEMU NVMe Ctrl   ","only_ref":true}`
	got := `{"n":1,"stats":{"hbmw":16,"mbmw":340282366920938463463374607431768211454},"ruhss":[{"pid":0},{"pid":2}],"mn":"QEMU NVMe Ctrl","only_got":null}`
	diffs, err := CompareJSONTrees([]byte(ref), []byte(got))
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]LeafDiff{}
	for _, d := range diffs {
		byPath[d.Path] = d
	}
	want := map[string]LeafDiff{
		"n":            {Path: "n", Ref: "1", Got: "1", InRef: true, InGot: true},
		"stats.hbmw":   {Path: "stats.hbmw", Ref: "16", Got: "16", InRef: true, InGot: true},
		"stats.mbmw":   {Path: "stats.mbmw", Ref: "340282366920938463463374607431768211455", Got: "340282366920938463463374607431768211454", InRef: true, InGot: true, Different: true},
		"ruhss[0].pid": {Path: "ruhss[0].pid", Ref: "0", Got: "0", InRef: true, InGot: true},
		"ruhss[1].pid": {Path: "ruhss[1].pid", Ref: "1", Got: "2", InRef: true, InGot: true, Different: true},
		"mn":           {Path: "mn", Ref: "QEMU NVMe Ctrl", Got: "QEMU NVMe Ctrl", InRef: true, InGot: true},
		"only_ref":     {Path: "only_ref", Ref: "true", InRef: true},
		"only_got":     {Path: "only_got", Got: "null", InGot: true},
	}
	if len(diffs) != len(want) {
		t.Fatalf("%d paths, want %d: %+v", len(diffs), len(want), diffs)
	}
	for p, w := range want {
		if byPath[p] != w {
			t.Errorf("%s: %+v, want %+v", p, byPath[p], w)
		}
	}
	for i := 1; i < len(diffs); i++ {
		if diffs[i-1].Path >= diffs[i].Path {
			t.Errorf("not in path order: %q before %q", diffs[i-1].Path, diffs[i].Path)
		}
	}
}

func TestFlattenJSONRejects(t *testing.T) {
	for _, doc := range []string{"", "{", "[1,2", "nvme: command failed"} {
		if _, err := FlattenJSON([]byte(doc)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("%q: %v, want ErrNotJSON", doc, err)
		}
	}
	big := "[" + strings.Repeat("1,", maxLeaves+10) + "1]"
	if _, err := FlattenJSON([]byte(big)); err == nil {
		t.Error("a document of more than maxLeaves values was accepted")
	}
}

func FuzzCompareJSONTrees(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"0x2"}]}`), []byte(`{"a":[1,{"b":2}],"c":null}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		diffs, err := CompareJSONTrees(a, b)
		if err != nil {
			return
		}
		for _, d := range diffs {
			if !d.InRef && !d.InGot || d.Different && (!d.InRef || !d.InGot) {
				t.Fatalf("inconsistent %+v", d)
			}
		}
	})
}
