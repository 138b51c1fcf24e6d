package cache

import (
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// After a restart, SeedPolicy gives each salt the handle most of its entries were written
// with, so a fresh cache-salt policy does not reassign handles in a new first-seen order.
func TestSeedPolicyAfterReopen(t *testing.T) {
	mem := blockdev.NewMem(16<<20, 4096)
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = 8192
	cfg.MetaTotalBytes = 1 << 20
	cfg.Periodic = false
	cfg.FinalCheckpoint = true
	pol, _ := placement.Parse("metadata-class+cache-salt", 8)
	cfg.Placer = pol
	e, err := engine.Format(keepOpenDev{mem}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	salts := []string{"a", "b", "c", "b", "a", "b"}
	var keys []engine.Key
	var vals [][]byte
	for i, s := range salts {
		keys, vals = append(keys, engine.ObjectKey("m", 0, []byte{byte(i)}, s)), append(vals, []byte{byte(i)})
	}
	if res, err := e.PutMany(keys, vals); err != nil || len(res.Stored) != len(keys) {
		t.Fatalf("put: %v %+v", err, res)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg2 := cfg
	fresh, _ := placement.Parse("metadata-class+cache-salt", 8)
	cfg2.Placer = fresh
	e2, err := engine.Open(keepOpenDev{mem}, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if n := SeedPolicy(fresh, e2); n != 3 {
		t.Fatalf("seeded %d salts, want 3", n)
	}
	// First seen order a, b, c gave handles 0, 1, 2; ask in another order.
	for _, tc := range []struct {
		salt string
		want placement.Handle
	}{{"c", 2}, {"b", 1}, {"a", 0}, {"d", 3}} {
		if h := fresh.Place(placement.Write{CacheSalt: tc.salt}); h != tc.want {
			t.Fatalf("after reopen salt %q on %d, want %d", tc.salt, h, tc.want)
		}
	}
}

// keepOpenDev lets a test reopen an engine on the same memory device after Close.
type keepOpenDev struct{ blockdev.Device }

func (keepOpenDev) Close() error { return nil }
