package bench

import (
	"context"
	"os"
	"path/filepath"
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
	// Every freed slot is deallocated before it is written again (docs/engine.md
	// "Deallocation").
	if sh.DeallocatedBytes() == 0 {
		t.Fatal("freed slots were not deallocated")
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

// UseLoadBuffers: on an io_uring file the load arena is registered and loads are fixed
// reads straight into it, verified against their keys; when the arena is busy, loads fall
// back to heap buffers; Release after Close frees it.
func TestBackendLoadBuffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.img")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const slot = 4096 + 64<<10
	if err := os.Truncate(path, 2<<20+64*slot); err != nil {
		t.Fatal(err)
	}
	d, err := blockdev.OpenUring(path, blockdev.UringOptions{QueueDepth: 16, Rings: 1})
	if err != nil {
		t.Skipf("io_uring O_DIRECT file: %v", err)
	}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes = slot
	cfg.MetaTotalBytes = 2 << 20
	cfg.Periodic = false
	e, err := engine.Format(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	be := NewBackend(e, "tiny", nil, 60<<10)
	registered, err := be.UseLoadBuffers(4, 4096)
	if err != nil || !registered {
		t.Fatalf("UseLoadBuffers: registered=%v err=%v", registered, err)
	}
	ks := make([]workloads.Key, 6) // more keys than arena buffers: two use heap buffers
	for i := range ks {
		ks[i] = workloads.Key{Hash: uint64(1000 + i)}
	}
	ok := make([]bool, len(ks))
	if err := be.Store(ks, 60<<10, ok); err != nil {
		t.Fatal(err)
	}
	s0 := d.Stats()
	if n, err := be.Load(ks[:4], 60<<10); err != nil || n != 4 {
		t.Fatalf("Load of 4: %d, %v", n, err)
	}
	if s := d.Stats(); s.FixedOps-s0.FixedOps != 4 || s.PlainOps-s0.PlainOps != 0 {
		t.Fatalf("loads into the arena: %d fixed, %d plain; want 4 fixed", s.FixedOps-s0.FixedOps, s.PlainOps-s0.PlainOps)
	}
	s0 = d.Stats()
	if n, err := be.Load(ks, 60<<10); err != nil || n != len(ks) { // checked against their keys
		t.Fatalf("Load of %d with 4 arena buffers: %d, %v", len(ks), n, err)
	}
	if s := d.Stats(); s.FixedOps-s0.FixedOps < 4 || s.FixedOps-s0.FixedOps+s.PlainOps-s0.PlainOps != int64(len(ks)) {
		t.Fatalf("loads: %d fixed, %d plain; want at least the arena's 4 fixed, %d in all", s.FixedOps-s0.FixedOps, s.PlainOps-s0.PlainOps, len(ks))
	}
	if len(be.arena.free) != 4 {
		t.Fatalf("%d arena buffers back after the load, want 4", len(be.arena.free))
	}
	if _, err := be.UseLoadBuffers(4, 4096); err == nil {
		t.Fatal("a second UseLoadBuffers was accepted")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	be.Release()
	if be.arena != nil {
		t.Fatal("Release kept the arena")
	}
}
