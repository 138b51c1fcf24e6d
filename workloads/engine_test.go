package workloads

import (
	"context"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
)

// A short bench end to end: the driver runs the KV workload through the engine on a memory
// device wrapped in the shadow FTL; loads are verified against their keys, every byte the
// engine wrote reached the model, and deletes were deallocated.
func TestEngineBackendEndToEnd(t *testing.T) {
	const size = 64 << 20
	mem := blockdev.NewMem(size, 4096)
	m, err := ftl.New(ftl.Config{MappingUnit: 4096, LogicalBytes: size, OP: 0.07, RUBytes: 1 << 20, Handles: 4})
	if err != nil {
		t.Fatal(err)
	}
	sh := NewShadow(mem, m)
	pol, err := placement.Parse("metadata-class+cache-salt", 4)
	if err != nil {
		t.Fatal(err)
	}
	placer := PolicyPlacer{Policy: pol, Model: "tiny"}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = 4096 + 64<<10
	cfg.MetaTotalBytes = 2 << 20
	cfg.Placer = placer
	cfg.MetadataHandle = placer.MetadataHandle()
	cfg.DeallocateOnDelete = true
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.IdleQuiet = time.Millisecond
	cfg.LoadCheckpoint = false
	e, err := engine.Format(sh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 256, MaxContextTokens: 8192, Requests: 300, Seed: 1})
	ttl := []float64{0.15, 0, 0.5}
	be := NewEngineBackend(e, "tiny", g.Salts(), g.ChunkBytes())
	d, err := NewDriver(DriverConfig{TargetUtil: 0.9, TTL: ttl, Workers: 3}, g, be)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	c := res.Counters
	if c.ChunksHit == 0 || c.ChunksLoaded != c.ChunksHit {
		t.Fatalf("hits %d, loaded %d", c.ChunksHit, c.ChunksLoaded)
	}
	if c.Evicted+c.Expired == 0 || c.StoreFailed != 0 {
		t.Fatalf("evicted %d expired %d failed stores %d", c.Evicted, c.Expired, c.StoreFailed)
	}
	st := sh.Stats()
	if st.HostBytes < uint64(c.BytesWritten) {
		t.Fatalf("model saw %d host bytes, driver stored %d payload bytes", st.HostBytes, c.BytesWritten)
	}
	if sh.DeallocatedBytes() == 0 {
		t.Fatal("no deallocate reached the device")
	}
	if st.WAF() < 1 {
		t.Fatalf("WAF %.3f", st.WAF())
	}
	// metadata-class puts checkpoints on the last handle; cache-salt spreads data on the others.
	if st.Handles[3].HostBytes == 0 {
		t.Fatal("no checkpoint bytes on the metadata handle")
	}
	used := 0
	for _, h := range st.Handles[:3] {
		if h.HostBytes > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("data went to %d handles, want tenants spread over at least 2", used)
	}
}

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
	cfg.Placer = PolicyPlacer{Policy: pol}
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
	cfg2.Placer = PolicyPlacer{Policy: fresh}
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
		want int
	}{{"c", 2}, {"b", 1}, {"a", 0}, {"d", 3}} {
		if h := fresh.Place(placement.Write{CacheSalt: tc.salt}); h != tc.want {
			t.Fatalf("after reopen salt %q on %d, want %d", tc.salt, h, tc.want)
		}
	}
}

// keepOpenDev lets a test reopen an engine on the same memory device after Close.
type keepOpenDev struct{ blockdev.Device }

func (keepOpenDev) Close() error { return nil }
