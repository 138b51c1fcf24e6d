package placement

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Setenv(GPUsEnv, "3")
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
		{"cache-salt:bytes", 4, "cache-salt:bytes", ""},
		{"cache-salt:rank", 4, "cache-salt:bytes", ""}, // old name of cache-salt:bytes, not LMCache's cache_salt_rank
		{"cache_salt_prefix", 4, "cache_salt_prefix", ""},
		{"CACHE_SALT_PREFIX", 4, "cache_salt_prefix", ""},
		{"cache_salt_prefix:handles=0/1/2/3", 4, "cache_salt_prefix", ""},
		{"cache_salt_prefix:handles=3/1", 4, "cache_salt_prefix:handles=3/1", ""},
		{"cache_salt_rank", 8, "cache_salt_rank:gpus=3", ""}, // RBCTL_GPUS=3 (TestParse sets it)
		{"cache_salt_rank:ranks=4", 8, "cache_salt_rank:gpus=4", ""},
		{"cache_salt_rank:gpus=0", 8, "cache_salt_rank:gpus=0", ""},
		{"cache_salt_rank:handles=7/6:ranks=2", 8, "cache_salt_rank:gpus=2:handles=7/6", ""},
		{"metadata-class+cache_salt_rank:gpus=8", 9, "metadata-class+cache_salt_rank:gpus=8", ""},
		{"metadata-class+cache_salt_prefix:handles=3", 4, "", "handle 3, but the policy has 3 data handles"},
		{"cache_salt_prefix:handles=4", 4, "", "handle 4, but the policy has 4 data handles"},
		{"cache_salt_prefix:handles=1/1", 4, "", "handle 1 listed twice"},
		{"cache_salt_prefix:handles=x", 4, "", `handle "x" is not an integer`},
		{"cache_salt_prefix:ranks=2", 4, "", "gpus= belongs to cache_salt_rank"},
		{"cache_salt_rank:gpus=-1", 4, "", "gpus must be the node's GPU count, 0..256"},
		{"cache_salt_rank:ranks=257", 4, "", "gpus must be the node's GPU count, 0..256"},
		{"cache_salt_rank:ranks=2:gpus=2", 4, "", "given twice"},
		{"cache_salt_rank:lanes=2", 4, "", `unknown option "lanes"`},
		{"cache_salt_rankx", 4, "", "want cache_salt_rank[:gpus=N]"},
		{"cache_salt_prefix", 0, "", "device has none"},
		{"hotness", 2, "hotness", ""},
		{"metadata-class", 2, "metadata-class", ""},
		{"metadata-class", 1, "", "at least 2 handles"},
		{"metadata-class+cache-salt", 4, "metadata-class+cache-salt", ""},
		{"cache-salt+metadata-class", 4, "metadata-class+cache-salt", ""},
		{"metadata-class+hotness", 3, "metadata-class+hotness", ""},
		{"metadata-class+cache-salt:rank", 8, "metadata-class+cache-salt:bytes", ""},
		{"metadata-class+static:2", 4, "metadata-class+static:2", ""},
		{"metadata-class+static:3", 4, "", "metadata-class reserves handle 3"},
		{"metadata-class+none", 2, "metadata-class+none", ""},
		{"metadata-class+metadata-class", 4, "", "twice"},
		{"cache-salt+hotness", 4, "", "only metadata-class composes"},
		{"metadata-class+", 4, "", "empty component"},
		{"x", 4, "", "unknown policy 'x'; known: none, static:N, round-robin"},
		{"cache-salt", 0, "", "device has none"},
		{"oracle:lifetime", 8, "", "only the simulator runs it"},
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
