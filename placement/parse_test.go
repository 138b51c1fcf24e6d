package placement

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		spec    string
		handles int
		name    string // canonical Name(); "" when an error is expected
		err     string // substring of the error
	}{
		{"", 4, "none", ""},
		{"none", 0, "none", ""},
		{" None ", 4, "none", ""},
		{"static:0", 1, "static:0", ""},
		{"static:3", 4, "static:3", ""},
		{"static:7", 4, "", "static:7 needs at least 8 handles, device has 4"},
		{"static:x", 4, "", "handle index"},
		{"static:-1", 4, "", "handle index"},
		{"static", 4, "", "static:1"},
		{"round-robin", 4, "round-robin", ""},
		{"rr", 4, "round-robin", ""},
		{"cache-salt", 4, "cache-salt", ""},
		{"cache-salt:hash", 4, "cache-salt:hash", ""},
		{"cache-salt:assign", 4, "cache-salt", ""},
		{"metadata-class+cache-salt:hash", 8, "metadata-class+cache-salt:hash", ""},
		{"cache-salt:rank", 4, "cache-salt:rank", ""},
		{"hotness", 2, "hotness", ""},
		{"metadata-class", 2, "metadata-class", ""},
		{"metadata-class", 1, "", "at least 2 handles"},
		{"metadata-class+cache-salt", 4, "metadata-class+cache-salt", ""},
		{"cache-salt+metadata-class", 4, "metadata-class+cache-salt", ""},
		{"metadata-class+hotness", 3, "metadata-class+hotness", ""},
		{"metadata-class+cache-salt:rank", 8, "metadata-class+cache-salt:rank", ""},
		{"metadata-class+static:2", 4, "metadata-class+static:2", ""},
		{"metadata-class+static:3", 4, "", "metadata-class reserves handle 3"},
		{"metadata-class+none", 2, "metadata-class+none", ""},
		{"metadata-class+metadata-class", 4, "", "twice"},
		{"cache-salt+hotness", 4, "", "only metadata-class composes"},
		{"metadata-class+", 4, "", "empty component"},
		{"x", 4, "", "unknown policy 'x'; known: none, static:N, round-robin"},
		{"cache-salt", 0, "", "device has none"},
		{"oracle:lifetime", 8, "", "only rbctl simulate runs it"},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := Parse(tc.spec, tc.handles)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q, %d) error %v, want one containing %q", tc.spec, tc.handles, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q, %d): %v", tc.spec, tc.handles, err)
			}
			if p.Name() != tc.name {
				t.Fatalf("Name() = %q, want %q", p.Name(), tc.name)
			}
			// Name round-trips through Parse.
			if q, err := Parse(p.Name(), tc.handles); err != nil || q.Name() != p.Name() {
				t.Fatalf("Parse(Name()) = %v, %v", q, err)
			}
		})
	}
}
