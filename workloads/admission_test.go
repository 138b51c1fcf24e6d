package workloads

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// runTrace runs a JSONL Mooncake trace (512-token chunks) against a map backend.
func runTrace(t *testing.T, trace, admission string, slots int64) (Counters, *mapBackend) {
	t.Helper()
	tr, err := ReadMooncake(strings.NewReader(trace), SaltBy{Rule: "none"})
	if err != nil {
		t.Fatal(err)
	}
	be := newMapBackend(slots)
	d, err := NewDriver(DriverConfig{TargetUtil: 1, Admission: admission}, tr.Replay(512, 1, 1), be)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res.Counters, be
}

const thrice = `{"timestamp": 0, "input_length": 2048, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 1, "input_length": 2048, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 2, "input_length": 2048, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 3, "input_length": 1024, "hash_ids": [9, 8]}
`

// all stores every miss; second-hit only on the second miss, so the prompt seen three
// times hits once instead of twice; prefix-depth:2 stores the first two chunks of each.
func TestAdmissionPolicies(t *testing.T) {
	for _, tc := range []struct {
		adm                  string
		stored, hit, refused int64
	}{
		{"all", 6, 8, 0},
		{"second-hit", 4, 4, 4 + 2},
		{"prefix-depth:2", 4, 4, 2 + 2 + 2},
	} {
		c, be := runTrace(t, thrice, tc.adm, 100)
		if c.ChunksStored != tc.stored || c.ChunksHit != tc.hit || c.AdmissionRefused != tc.refused || be.stores != tc.stored {
			t.Errorf("%s: stored %d, hit %d, refused %d; want %d, %d, %d", tc.adm, c.ChunksStored, c.ChunksHit, c.AdmissionRefused,
				tc.stored, tc.hit, tc.refused)
		}
	}
}

// The chunks after a refused one are not stored: a prefix lookup could not reach them.
func TestAdmissionKeepsPrefix(t *testing.T) {
	trace := `{"timestamp": 0, "input_length": 512, "hash_ids": [1]}
{"timestamp": 1, "input_length": 1536, "hash_ids": [1, 2, 3]}
`
	c, be := runTrace(t, trace, "second-hit", 100)
	// Request 2 misses block 1 a second time (stored) but blocks 2 and 3 for the first time.
	if c.ChunksStored != 1 || !be.keys[Key{Hash: ChunkKey(1, 0)}] {
		t.Errorf("stored %d chunks: %v", c.ChunksStored, be.keys)
	}
}

// TinyLFU keeps a hot block in a full cache.
func TestTinyLFU(t *testing.T) {
	// A full cache of one hot block: a one-off prompt does not displace it.
	trace := `{"timestamp": 0, "input_length": 512, "hash_ids": [1]}
{"timestamp": 1, "input_length": 512, "hash_ids": [1]}
{"timestamp": 2, "input_length": 512, "hash_ids": [7]}
{"timestamp": 3, "input_length": 512, "hash_ids": [1]}
`
	if c, _ := runTrace(t, trace, "tinylfu", 1); c.ChunksHit != 2 || c.AdmissionRefused != 1 {
		t.Errorf("tinylfu: hit %d, refused %d", c.ChunksHit, c.AdmissionRefused)
	}
	if c, _ := runTrace(t, trace, "all", 1); c.ChunksHit != 1 {
		t.Errorf("all: hit %d", c.ChunksHit)
	}
}

func TestAdmissionSpecs(t *testing.T) {
	for _, ok := range []string{"all", "second-hit", "second-hit:1000", "tinylfu", "tinylfu:5", "prefix-depth:8"} {
		if err := CheckAdmission(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "none", "all:3", "prefix-depth", "prefix-depth:0", "second-hit:-1", "tinylfu:x"} {
		if err := CheckAdmission(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
