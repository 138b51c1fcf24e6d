package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads"
)

// A short bench end to end: the driver runs the KV workload through the engine on a memory
// device wrapped in the shadow FTL; loads are verified against their keys, every byte the
// engine wrote reached the model, and deletes were deallocated.
func TestBackendEndToEnd(t *testing.T) {
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
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = 4096 + 64<<10
	cfg.MetaTotalBytes = 2 << 20
	cfg.Placer = pol
	cfg.MetadataHandle = pol.Place(placement.Write{Metadata: true, ChunkIndex: -1})
	cfg.DeallocateOnDelete = true
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.IdleQuiet = time.Millisecond
	cfg.LoadCheckpoint = false
	e, err := engine.Format(sh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 256, MaxContextTokens: 8192, Requests: 300, Seed: 1})
	ttl := []float64{0.15, 0, 0.5}
	be := NewBackend(e, "tiny", g.Salts(), g.ChunkBytes())
	d, err := workloads.NewDriver(workloads.DriverConfig{TargetUtil: 0.9, TTL: ttl, Workers: 3}, g, be)
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
	// A freed slot is either deallocated or, when a put reuses it before its discard is
	// issued, overwritten (the engine cancels the discard: docs/engine.md "Deallocation").
	if es := e.Stats(); sh.DeallocatedBytes() == 0 && es.DeallocatesCanceled == 0 {
		t.Fatal("freed slots were neither deallocated nor reused")
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
