package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Leaf is one scalar of a JSON document, named by its path ("status.ruhss[3].ruamw").
type Leaf struct {
	Path  string
	Value string // numbers as their exact decimal text, strings without trailing spaces
}

// maxLeaves bounds what FlattenJSON accepts (a 4 KiB FDP log prints a few hundred).
const maxLeaves = 1 << 16

// FlattenJSON lists every scalar of doc in path order. Numbers keep their exact text, so a
// 128-bit counter compares digit for digit; strings that hold a number ("0x1f", "42": the
// way some nvme-cli versions print counters) are normalised to decimal.
func FlattenJSON(doc []byte) ([]Leaf, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	var out []Leaf
	var walk func(p string, v any) error
	walk = func(p string, v any) error {
		if len(out) > maxLeaves {
			return fmt.Errorf("more than %d values", maxLeaves)
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				q := k
				if p != "" {
					q = p + "." + k
				}
				if err := walk(q, e); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(fmt.Sprintf("%s[%d]", p, i), e); err != nil {
					return err
				}
			}
		case json.Number:
			out = append(out, Leaf{p, numText(x.String())})
		case string:
			out = append(out, Leaf{p, numText(strings.TrimRight(x, " "))})
		case bool:
			out = append(out, Leaf{p, strconv.FormatBool(x)})
		case nil:
			out = append(out, Leaf{p, "null"})
		}
		return nil
	}
	if err := walk("", v); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// numText gives integers (decimal or 0x hex, any size up to 128 bits) as decimal; other
// text unchanged.
func numText(s string) string {
	if u, err := strconv.ParseUint(s, 0, 64); err == nil {
		return strconv.FormatUint(u, 10)
	}
	if len(s) > 19 && len(s) <= 39 && strings.Trim(s, "0123456789") == "" {
		return strings.TrimLeft(s, "0")
	}
	return s
}

// LeafDiff is one path compared between a reference document and another.
type LeafDiff struct {
	Path      string
	Ref, Got  string
	InRef     bool // the reference has it
	InGot     bool // the other document has it
	Different bool // both have it and the values differ
}

// CompareJSONTrees compares two documents path by path: every leaf of either, whether each
// has it, and whether the values agree.
func CompareJSONTrees(ref, got []byte) ([]LeafDiff, error) {
	a, err := FlattenJSON(ref)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	b, err := FlattenJSON(got)
	if err != nil {
		return nil, fmt.Errorf("compared: %w", err)
	}
	m := map[string]*LeafDiff{}
	var paths []string
	for _, l := range a {
		m[l.Path] = &LeafDiff{Path: l.Path, Ref: l.Value, InRef: true}
		paths = append(paths, l.Path)
	}
	for _, l := range b {
		d := m[l.Path]
		if d == nil {
			d = &LeafDiff{Path: l.Path}
			m[l.Path] = d
			paths = append(paths, l.Path)
		}
		d.Got, d.InGot = l.Value, true
		d.Different = d.InRef && d.Ref != d.Got
	}
	sort.Strings(paths)
	out := make([]LeafDiff, len(paths))
	for i, p := range paths {
		out[i] = *m[p]
	}
	return out, nil
}
