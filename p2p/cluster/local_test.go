package cluster

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// bareCluster is a Cluster without memberlist, for the filter bookkeeping.
func bareCluster(name string) *Cluster {
	return &Cluster{cfg: Config{Name: name}, remotes: map[string]*remote{}, members: map[string]member{},
		failed: map[string]failed{}, jobs: make(chan job, 16), wantEvery: time.Second}
}

// Deltas applied in order rebuild exactly the publisher's counters, through random admits
// and evictions (double admits and unknown evictions included).
func TestPublishedDeltasRebuildTheFilter(t *testing.T) {
	l, err := newLocalFilter(2000, 0.01, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rx := bareCluster("rx")
	rx.applyFull(&full{origin: "tx", epoch: 5, version: 0, filter: newBitFilter(l.published.geometry)}, time.Now())
	rng := rand.New(rand.NewPCG(1, 2))
	var held []uint64
	for round := 0; round < 50; round++ {
		for i := 0; i < 40; i++ {
			switch op := rng.IntN(10); {
			case op < 6 || len(held) == 0:
				id := rng.Uint64()
				l.add(id)
				l.add(id)
				held = append(held, id)
			case op < 9:
				j := rng.IntN(len(held))
				l.remove(held[j])
				held = append(held[:j], held[j+1:]...)
			default:
				l.remove(rng.Uint64())
			}
		}
		p := l.publish("tx", 5)
		if p.full != nil {
			t.Fatalf("round %d: a small change was published in full", round)
		}
		for i := range p.deltas {
			rx.applyDelta(&p.deltas[i], time.Now())
		}
		r := rx.remotes["tx"]
		if !reflect.DeepEqual(r.filter.words, l.counts.snapshot().words) || r.version != l.version {
			t.Fatalf("round %d: receiver at version %d differs from the counters at %d", round, r.version, l.version)
		}
	}
	for _, id := range held {
		if !rx.remotes["tx"].filter.mayContain(id) {
			t.Fatalf("held identity %d missing from the received filter", id)
		}
	}
	if len(rx.jobs) != 0 {
		t.Fatalf("in-order deltas made the receiver ask %d times", len(rx.jobs))
	}
}

func TestBulkChangePublishesAWholeFilter(t *testing.T) {
	l, _ := newLocalFilter(100000, 0.01, 1<<22)
	for id := uint64(0); id < 5000; id++ {
		l.add(id)
	}
	if len(l.pending) > maxDeltasPerPublish*maxDeltaPositions {
		t.Fatalf("%d bits pending: the set grew past what one publish's deltas carry", len(l.pending))
	}
	p := l.publish("tx", 1)
	if p.full == nil || len(p.deltas) != 0 || p.full.version != 1 {
		t.Fatalf("5000 admits published %d deltas, full %v; want one whole filter at version 1", len(p.deltas), p.full != nil)
	}
	if !reflect.DeepEqual(p.full.filter.words, l.counts.snapshot().words) {
		t.Fatal("the whole filter is not the counters'")
	}
	if p := l.publish("tx", 1); p.full != nil || len(p.deltas) != 0 {
		t.Fatal("a publish with no change sent something")
	}
}

func TestFilterGrowsPastTwiceItsDesignLoad(t *testing.T) {
	l, _ := newLocalFilter(100, 0.01, 1<<20)
	before := l.counts.bits
	for id := uint64(0); id <= 200; id++ {
		l.add(id)
	}
	if l.counts.bits <= before {
		t.Fatalf("filter stayed at %d bits with 201 keys for 100", l.counts.bits)
	}
	p := l.publish("tx", 1)
	if p.full == nil || p.full.filter.bits != l.counts.bits {
		t.Fatal("a grown filter was not published whole")
	}
	for id := uint64(0); id <= 200; id++ {
		if !p.full.filter.mayContain(id) {
			t.Fatalf("identity %d lost in the rebuild", id)
		}
	}
	// At the cap it stops growing, and keeps every key.
	capped, _ := newLocalFilter(100, 0.01, 128)
	for id := uint64(0); id <= 1000; id++ {
		capped.add(id)
	}
	if capped.counts.bytes() > 128 {
		t.Fatalf("filter grew to %d bytes past its cap of 128", capped.counts.bytes())
	}
}

func TestDeltaGapsAskForTheWholeFilter(t *testing.T) {
	rx := bareCluster("rx")
	now := time.Now()
	g := geometry{bits: 128, hashes: 2}
	rx.applyFull(&full{origin: "tx", epoch: 5, version: 3, filter: newBitFilter(g)}, now)
	for _, tc := range []struct {
		name string
		d    delta
		ask  bool
		ver  uint64
	}{
		{"retransmission", delta{origin: "tx", epoch: 5, from: 2, positions: []uint32{1 | positionValue}}, false, 3},
		{"earlier life", delta{origin: "tx", epoch: 4, from: 3, positions: []uint32{1 | positionValue}}, false, 3},
		{"next", delta{origin: "tx", epoch: 5, from: 3, positions: []uint32{1 | positionValue}}, false, 4},
		{"out of range", delta{origin: "tx", epoch: 5, from: 4, positions: []uint32{128}}, true, 4},
		{"gap", delta{origin: "tx", epoch: 5, from: 9}, false, 4}, // asked already within wantEvery
		{"new life", delta{origin: "tx", epoch: 6, from: 0}, false, 4},
		{"unknown peer", delta{origin: "other", epoch: 1, from: 0}, true, 4},
		{"self", delta{origin: "rx", epoch: 1, from: 0}, false, 4},
	} {
		rx.applyDelta(&tc.d, now)
		asked := len(rx.jobs) > 0
		if asked {
			j := <-rx.jobs
			if !j.want || j.to != tc.d.origin {
				t.Errorf("%s: job %+v", tc.name, j)
			}
		}
		if asked != tc.ask || rx.remotes["tx"].version != tc.ver {
			t.Errorf("%s: asked %v, version %d; want %v, %d", tc.name, asked, rx.remotes["tx"].version, tc.ask, tc.ver)
		}
	}
	if !rx.remotes["tx"].filter.get(1) {
		t.Fatal("the in-order delta did not set its bit")
	}
	// An older whole filter does not replace a newer one; a newer life does.
	rx.applyFull(&full{origin: "tx", epoch: 5, version: 2, filter: newBitFilter(g)}, now)
	if rx.remotes["tx"].version != 4 {
		t.Fatal("an older whole filter replaced a newer one")
	}
	rx.applyFull(&full{origin: "tx", epoch: 6, version: 0, filter: newBitFilter(g)}, now)
	if r := rx.remotes["tx"]; r.epoch != 6 || r.version != 0 {
		t.Fatalf("a restarted peer's filter was refused: epoch %d version %d", r.epoch, r.version)
	}
}

// A push-pull digest ahead of the filter held is first taken for deltas in flight; still
// behind at the next digest, the node asks for the whole filter.
func TestDigestAheadTwiceAsksForTheWholeFilter(t *testing.T) {
	rx := bareCluster("rx")
	now := time.Now()
	rx.applyFull(&full{origin: "tx", epoch: 5, version: 3, filter: newBitFilter(geometry{bits: 64, hashes: 1})}, now)
	rx.applyDigest(&digest{origin: "tx", epoch: 5, version: 3}, now)
	rx.applyDigest(&digest{origin: "tx", epoch: 5, version: 4}, now)
	if len(rx.jobs) != 0 {
		t.Fatal("asked on the first digest ahead")
	}
	rx.applyDigest(&digest{origin: "tx", epoch: 5, version: 4}, now)
	if len(rx.jobs) != 1 {
		t.Fatal("still behind at the second digest, and did not ask")
	}
	if j := <-rx.jobs; !j.want || j.to != "tx" {
		t.Fatalf("job %+v", j)
	}
	rx.applyDigest(&digest{origin: "new", epoch: 1, version: 0}, now)
	if len(rx.jobs) != 1 {
		t.Fatal("a digest from a peer without a filter here did not ask at once")
	}
}

func TestStrayFiltersAreForgotten(t *testing.T) {
	rx := bareCluster("rx")
	rx.cfg.ReconnectFor = time.Minute
	now := time.Now()
	rx.members["live"] = member{}
	rx.remotes["live"] = &remote{updated: now.Add(-time.Hour)}
	rx.remotes["gone"] = &remote{updated: now.Add(-time.Hour)}
	rx.remotes["fresh"] = &remote{updated: now}
	rx.forgetStrays(now)
	if _, ok := rx.remotes["gone"]; ok || len(rx.remotes) != 2 {
		t.Fatalf("after forgetStrays: %d filters, gone kept %v", len(rx.remotes), ok)
	}
}

// memberlist delivers a burst of datagrams newest first: deltas wait for their predecessors.
func TestDeltasOutOfOrderAreStashedAndApplied(t *testing.T) {
	l, _ := newLocalFilter(5000, 0.01, 1<<20)
	rx := bareCluster("rx")
	now := time.Now()
	rx.applyFull(&full{origin: "tx", epoch: 1, version: 0, filter: newBitFilter(l.published.geometry)}, now)
	for id := uint64(0); id < 150; id++ { // about 1000 bits: several deltas
		l.add(id * 7919)
	}
	p := l.publish("tx", 1)
	if len(p.deltas) < 3 {
		t.Fatalf("%d deltas; the test needs several", len(p.deltas))
	}
	for i := len(p.deltas) - 1; i >= 0; i-- {
		rx.applyDelta(&p.deltas[i], now)
	}
	r := rx.remotes["tx"]
	if r.version != l.version || len(r.stash) != 0 || len(rx.jobs) != 0 {
		t.Fatalf("version %d of %d, %d stashed, %d asks", r.version, l.version, len(r.stash), len(rx.jobs))
	}
	if !reflect.DeepEqual(r.filter.words, l.counts.snapshot().words) {
		t.Fatal("reordered deltas built a different filter")
	}
	// A gap that outlasts the grace period makes the node ask.
	rx.applyDelta(&delta{origin: "tx", epoch: 1, from: r.version + 2}, now)
	if len(rx.jobs) != 0 {
		t.Fatal("asked at once for a delta that may be in flight")
	}
	rx.applyDelta(&delta{origin: "tx", epoch: 1, from: r.version + 3}, now.Add(2*rx.wantEvery))
	if len(rx.jobs) != 1 {
		t.Fatal("a lasting gap did not make the node ask")
	}
}

// addMany ends where add one id at a time ends: the same held set, geometry, counters and
// publication, across growth steps, up to the cap, with ids repeated and ids held before.
func TestAddManyIsAddOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		expected, maxBytes, before, batch int
	}{
		{100, 1 << 20, 0, 50},       // no growth: deltas
		{100, 1 << 20, 0, 201},      // one step past twice the design load
		{100, 1 << 20, 30, 5000},    // several steps, keys held before
		{100, 1 << 20, 150, 60},     // the batch crosses 2x from a held set
		{100, 128, 10, 3000},        // stops at the cap
		{1 << 20, 16 << 20, 0, 100}, // a node's default, a few keys
	} {
		one, _ := newLocalFilter(tc.expected, 0.01, tc.maxBytes)
		many, _ := newLocalFilter(tc.expected, 0.01, tc.maxBytes)
		var pool []uint64
		for range tc.before {
			id := rng.Uint64()
			pool = append(pool, id)
			one.add(id)
			many.add(id)
		}
		one.publish("tx", 1)
		many.publish("tx", 1)
		batch := make([]uint64, tc.batch)
		for i := range batch {
			switch r := rng.IntN(10); {
			case r == 0 && len(pool) > 0: // held before or earlier in the batch
				batch[i] = pool[rng.IntN(len(pool))]
			default:
				batch[i] = rng.Uint64()
				pool = append(pool, batch[i])
			}
		}
		for _, id := range batch {
			one.add(id)
		}
		many.addMany(batch)
		if !reflect.DeepEqual(one.held, many.held) || one.expected != many.expected ||
			one.counts.geometry != many.counts.geometry || !reflect.DeepEqual(one.counts.counts, many.counts.counts) {
			t.Fatalf("%+v: one by one %d held, sized for %d, %d bits; at once %d, %d, %d", tc,
				len(one.held), one.expected, one.counts.bits, len(many.held), many.expected, many.counts.bits)
		}
		p1, pm := one.publish("tx", 1), many.publish("tx", 1)
		if (p1.full == nil) != (pm.full == nil) || len(p1.deltas) != len(pm.deltas) || one.version != many.version ||
			!reflect.DeepEqual(one.published.words, many.published.words) {
			t.Fatalf("%+v: publications differ: whole %v/%v, %d/%d deltas, version %d/%d", tc,
				p1.full != nil, pm.full != nil, len(p1.deltas), len(pm.deltas), one.version, many.version)
		}
	}
}
