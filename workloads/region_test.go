package workloads

import (
	"context"
	"strings"
	"testing"
	"time"
)

// regionBackend records each key's position in its tenant's store stream and checks, at
// every delete, that no resident key is left behind in a region the delete touched.
type regionBackend struct {
	*mapBackend
	t       *testing.T
	per     float64       // region size in stores
	n       map[int]int64 // per tenant: stores so far
	region  map[Key]int64
	evicted int
}

func (b *regionBackend) Store(ks []Key, size int, ok []bool) error {
	if err := b.mapBackend.Store(ks, size, ok); err != nil {
		return err
	}
	for i, k := range ks {
		if ok[i] {
			t := int(k.Tenant)
			b.region[k] = int64(float64(b.n[t]) / b.per)
			b.n[t]++
		}
	}
	return nil
}

func (b *regionBackend) Delete(ks []Key) error {
	touched := map[int64]bool{}
	for _, k := range ks {
		touched[b.region[k]] = true
	}
	if err := b.mapBackend.Delete(ks); err != nil {
		return err
	}
	for k := range b.keys {
		if touched[b.region[k]] {
			b.t.Fatalf("key %v of region %d survived a delete of its region (%d keys deleted)", k, b.region[k], len(ks))
		}
	}
	b.evicted += len(ks)
	return nil
}

// Region eviction drops whole regions: a region is RegionSlots consecutive stores of one
// tenant (fractional sizes alternate, so regions stay on reclaim-unit boundaries), and the
// cache still fills up to its target.
func TestRegionEvictionDropsWholeRegions(t *testing.T) {
	for _, ev := range []Eviction{Region, RegionFIFO} {
		for _, per := range []float64{1, 7.5, 10, 33.3} {
			g, _ := NewKV(KVConfig{Tenants: MultiTenant()[:1], ChunkTokens: 256, BytesPerToken: 16, Requests: 6000, Seed: 3})
			be := &regionBackend{mapBackend: newMapBackend(1000), t: t, per: per, n: map[int]int64{}, region: map[Key]int64{}}
			d, err := NewDriver(DriverConfig{Eviction: ev, TargetUtil: 0.8, RegionSlots: per}, g, be)
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if be.maxRes > 800 || be.maxRes < 800-int(per)-1 {
				t.Errorf("%s/%g: %d resident chunks at most, target 800", ev, per, be.maxRes)
			}
			if res.Counters.Evicted == 0 || be.evicted != int(res.Total.Evicted) {
				t.Errorf("%s/%g: %d evicted, backend saw %d deletes", ev, per, res.Total.Evicted, be.evicted)
			}
		}
	}
}

// A hit keeps its region: on a skewed workload region (LRU over regions) hits more than
// region-fifo, and a one-slot region is exactly LRU.
func TestRegionEvictionHits(t *testing.T) {
	run := func(ev Eviction, per float64) float64 {
		tn := DefaultTenant("a")
		tn.Prefixes, tn.Theta = 4, 1.2
		g, _ := NewKV(KVConfig{Tenants: []Tenant{tn}, ChunkTokens: 256, BytesPerToken: 16, Requests: 8000, Seed: 2})
		d, err := NewDriver(DriverConfig{Eviction: ev, TargetUtil: 0.9, RegionSlots: per}, g, newMapBackend(300))
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.Counters.HitRatio()
	}
	lru, one := run(LRU, 0), run(Region, 1)
	if lru != one {
		t.Errorf("region eviction with one-slot regions hit %.4f, LRU %.4f: want the same", one, lru)
	}
	if r, f := run(Region, 8), run(RegionFIFO, 8); r <= f {
		t.Errorf("region hit ratio %.4f not above region-fifo %.4f", r, f)
	}
}

func TestRegionEvictionNeedsASize(t *testing.T) {
	g, _ := NewKV(KVConfig{Tenants: MultiTenant()[:1], ChunkTokens: 256, BytesPerToken: 16, Requests: 10, Seed: 1})
	for _, per := range []float64{0, 0.5, -1} {
		if _, err := NewDriver(DriverConfig{Eviction: Region, RegionSlots: per}, g, newMapBackend(100)); err == nil || !strings.Contains(err.Error(), "region") {
			t.Errorf("RegionSlots %g: err %v, want a region size error", per, err)
		}
	}
	if _, err := ParseEviction("regions"); err == nil || !strings.Contains(err.Error(), "region-fifo") {
		t.Errorf("ParseEviction(regions): %v", err)
	}
}

// The region victim skips a region with a locked chunk and retires an open region whose
// chunks are all gone, going on to the next one.
func TestVictimRegionSkipsPinnedAndEmpty(t *testing.T) {
	r := newResidency(2, 2, 100, nil)
	put := func(tenant int32, h uint64) Key {
		k := Key{Tenant: tenant, Hash: h}
		r.reserve(k)
		r.commit(k, true, 0, false)
		return k
	}
	a1, a2 := put(0, 1), put(0, 2) // region A (tenant 0, full)
	b1 := put(1, 3)                // region B (tenant 1, open)
	c1 := put(0, 4)                // region C (tenant 0, open)
	r.ents[r.idx[a1]].pins++
	r.remove(b1) // B: open and empty
	out, n := r.victimRegion(0, nil)
	if n != 1 || len(out) != 1 || out[0] != c1 {
		t.Fatalf("victim %v (%d): want C's one chunk, A being pinned and B empty", out, n)
	}
	r.ents[r.idx[a1]].pins--
	out, n = r.victimRegion(0, nil)
	if n != 2 || !(out[0] == a1 && out[1] == a2) {
		t.Fatalf("victim %v (%d): want A's two chunks", out, n)
	}
	if out, n = r.victimRegion(0, nil); n != 0 || r.resident != 0 || r.rlrus[0].head != nilIdx {
		t.Fatalf("empty cache: victim %v (%d), %d resident, region list head %d", out, n, r.resident, r.rlrus[0].head)
	}
}

func TestRegionLargerThanHalfTheCacheRefused(t *testing.T) {
	g, _ := NewKV(KVConfig{Tenants: MultiTenant()[:1], ChunkTokens: 256, BytesPerToken: 16, Requests: 10, Seed: 1})
	if _, err := NewDriver(DriverConfig{Eviction: Region, RegionSlots: 46, TargetUtil: 0.9}, g, newMapBackend(100)); err == nil || !strings.Contains(err.Error(), "half") {
		t.Fatalf("46-chunk regions on a 90-chunk target: err %v", err)
	}
	if _, err := NewDriver(DriverConfig{Eviction: Region, RegionSlots: 45, TargetUtil: 0.9}, g, newMapBackend(100)); err != nil {
		t.Fatal(err)
	}
}

// slowDeletes makes every delete take a while, so concurrent workers overlap with it.
type slowDeletes struct{ *mapBackend }

func (b slowDeletes) Delete(ks []Key) error {
	time.Sleep(200 * time.Microsecond)
	return b.mapBackend.Delete(ks)
}

// With concurrent workers a store does not overtake the deletes issued before it: the
// backend never holds more than the target, as a device must learn of the room the cache
// made before the new data arrives.
func TestStoresWaitForEarlierDeletes(t *testing.T) {
	for _, ev := range []Eviction{LRU, Region} {
		g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 16, Requests: 4000, Seed: 4})
		var ttl []float64
		for _, tn := range MultiTenant() {
			ttl = append(ttl, tn.TTL)
		}
		be := slowDeletes{newMapBackend(1000)}
		d, err := NewDriver(DriverConfig{Eviction: ev, RegionSlots: 10, TargetUtil: 0.9, Workers: 4, TTL: ttl}, g, be)
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if be.maxRes > int(d.TargetSlots()) || res.Counters.Evicted == 0 {
			t.Errorf("%s: the backend held %d chunks with a target of %d (%d evicted)", ev, be.maxRes, d.TargetSlots(), res.Counters.Evicted)
		}
	}
}
