package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rbctl/rbctl/placement"
)

// DriverConfig sets how a workload is run.
type DriverConfig struct {
	Eviction Eviction
	// RegionSlots is the region size of Region and RegionFIFO eviction, in chunks: a reclaim
	// unit's bytes over a slot's (required for those, ignored otherwise). It may be
	// fractional; a tenant's n-th store goes to region ⌊n/RegionSlots⌋.
	RegionSlots float64
	TargetUtil  float64   // evict to keep resident chunks ≤ TargetUtil × Backend.Slots() (default 0.9)
	TTL         []float64 // per tenant (Op.Tenant), in capacity-writes; 0 = none
	Workers     int       // concurrent requests (default 1)
	Rate        float64   // requests per second, Poisson arrivals; 0 = closed loop
	// Speed replays a trace's arrival times (Op.At) this many times faster; 0 = as fast as
	// the workers go.
	Speed float64
	// Admission is the admission policy's spec (NewAdmission); "" or all stores every miss.
	Admission string
	// Duration bounds the measured window (after warm-up), wall clock; 0 = no limit.
	Duration time.Duration
	// WarmupTimeout ends the warm-up after this long even if WarmupBytes were not stored yet
	// (Result.WarmupTimedOut says so); 0 = no limit.
	WarmupTimeout time.Duration
	// OnWarm is called (lock held) when the measured window starts.
	OnWarm func()
	MaxOps int64 // stop after this many ops (0: when the generator ends)
	// StopAfterBytes stops once this many payload bytes were stored (0: no limit).
	StopAfterBytes int64
	// StallOps stops the run after this many consecutive ops stored nothing (0: never);
	// Result.Stalled says so. It keeps byte-bounded runs from spinning on a workload that
	// fits in the cache or only reads.
	StallOps int64
	// WarmupBytes: counters and histograms restart once this many bytes were stored, so the
	// result describes the measured window only.
	WarmupBytes int64
	// SampleBytes calls Sample every time this many more bytes were stored (0: never); it is
	// called with the driver's lock held, so it sees a consistent backend.
	SampleBytes int64
	Sample      func(c Counters)
	// SampleOps calls Sample before every SampleOps-th op too (0: never).
	SampleOps int64
	Seed      uint64
	// Budgets gives tenants slot budgets of their own (budgets.go); nil: one cache for all.
	Budgets placement.Budgets
	// SlotBytes is the cache's slot size, for budgets given in bytes (0: the chunk size).
	SlotBytes int64
}

// ErrRegionTooLarge: an eviction region holds too much of the cache.
var ErrRegionTooLarge = errors.New("eviction region too large")

// CheckRegion refuses regions of more than half the cache's target (in chunks): evicting
// one would all but empty the cache.
func CheckRegion(regionSlots float64, targetSlots int64) error {
	if regionSlots > float64(targetSlots)/2 {
		return fmt.Errorf("%w: %.1f chunks is more than half the cache's target of %d chunks: "+
			"evicting one would empty the cache; use smaller regions or a larger cache", ErrRegionTooLarge, regionSlots, targetSlots)
	}
	return nil
}

// Driver runs a generator against a backend.
type Driver struct {
	cfg   DriverConfig
	gen   Generator
	be    Backend
	salts []string
	size  int

	queue queueLog // ops with arrival times: when due, when done

	mu       sync.Mutex // guards res, genErr, next sample, the generator
	res      *residency
	c        Counters
	warm     Counters
	warmed   bool
	warmAt   time.Time
	nextSamp int64
	capBytes int64
	target   int64
	alloc    *placement.Allocation // the tenants' budgets; nil without
	adm      Admission             // nil: store every miss
	start    time.Time
	done     bool
	expired  []Key

	phase    atomic.Int64  // bumps at warm-up so workers reset their histograms
	warmCh   chan struct{} // closed when the measured window starts
	timedOut bool
	lastW    int64 // BytesWritten when the stall counter was last reset
	idleOps  int64
	stalled  bool

	// Deletes in flight (evictions, expiries), by ticket: a store waits for those issued
	// before it, so the device learns of the room the cache made before new data arrives.
	delCond    *sync.Cond
	delTicket  int64
	delPending map[int64]struct{}
}

// ErrNoCapacity: the backend has no room for even one chunk.
var ErrNoCapacity = errors.New("cache backend has no capacity")

// NewDriver prepares a run.
func NewDriver(cfg DriverConfig, gen Generator, be Backend) (*Driver, error) {
	if cfg.Eviction == "" {
		cfg.Eviction = LRU
	}
	if _, err := ParseEviction(string(cfg.Eviction)); err != nil {
		return nil, err
	}
	if cfg.Eviction.Regional() && !(cfg.RegionSlots >= 1) {
		return nil, fmt.Errorf("%s eviction needs a region of at least one slot (RegionSlots %g)", cfg.Eviction, cfg.RegionSlots)
	}
	if !cfg.Eviction.Regional() {
		cfg.RegionSlots = 0
	}
	if cfg.TargetUtil == 0 {
		cfg.TargetUtil = 0.9
	}
	if cfg.TargetUtil < 0 || cfg.TargetUtil > 1 {
		return nil, fmt.Errorf("target utilisation %g outside (0,1]", cfg.TargetUtil)
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	salts := gen.Salts()
	d := &Driver{cfg: cfg, gen: gen, be: be, salts: salts, size: gen.ChunkBytes(), delPending: map[int64]struct{}{}}
	d.delCond = sync.NewCond(&d.mu)
	slots := be.Slots()
	if slots <= 0 {
		return nil, ErrNoCapacity
	}
	d.target = TargetSlots(cfg.TargetUtil, slots)
	if err := CheckRegion(cfg.RegionSlots, d.target); err != nil {
		return nil, err
	}
	if len(cfg.Budgets) > 0 {
		slotB := cfg.SlotBytes
		if slotB <= 0 {
			slotB = int64(d.size)
		}
		a, err := ResolveBudgets(cfg.Budgets, salts, slots, slotB, cfg.TargetUtil)
		if err != nil {
			return nil, err
		}
		if err := checkRegionBudgets(cfg.RegionSlots, a, salts); err != nil {
			return nil, err
		}
		d.alloc = &a
	}
	d.res = newResidency(len(salts), cfg.RegionSlots, d.target, d.alloc)
	if cfg.Admission != "" {
		a, err := NewAdmission(cfg.Admission, d.target)
		if err != nil {
			return nil, err
		}
		d.adm = a
	}
	if cfg.Speed < 0 {
		return nil, fmt.Errorf("trace speed %g is negative", cfg.Speed)
	}
	d.capBytes = slots * int64(d.size)
	n := len(salts)
	d.c.TenantRequests, d.c.TenantBytesWritten = make([]int64, n), make([]int64, n)
	d.c.TenantChunksHit, d.c.TenantChunksRequested = make([]int64, n), make([]int64, n)
	d.c.TenantEvicted = make([]int64, n)
	d.nextSamp = cfg.SampleBytes
	return d, nil
}

// Counters returns a snapshot of the running totals (whole run).
func (d *Driver) Counters() Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c.clone()
}

// TargetSlots is the resident-chunk limit the eviction policy keeps.
func (d *Driver) TargetSlots() int64 { return d.target }

type work struct {
	op    Op
	keys  []Key
	start time.Time
}

// Run executes the workload until the generator ends, MaxOps, Duration, StopAfterBytes or ctx.
func (d *Driver) Run(parent context.Context) (*Result, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	start := time.Now()
	d.warmAt, d.start = start, start
	d.warmCh = make(chan struct{})
	d.mu.Lock()
	if d.cfg.WarmupBytes <= 0 {
		d.warmLocked()
	}
	d.mu.Unlock()
	go func() {
		var timeout <-chan time.Time
		if d.cfg.WarmupTimeout > 0 && d.cfg.WarmupBytes > 0 {
			t := time.NewTimer(d.cfg.WarmupTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-d.warmCh:
		case <-timeout:
			d.mu.Lock()
			if !d.warmed {
				d.timedOut = true
				d.warmLocked()
			}
			d.mu.Unlock()
		case <-ctx.Done():
			return
		}
		if d.cfg.Duration > 0 {
			t := time.NewTimer(d.cfg.Duration)
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		}
	}()
	var arrivals func() time.Time
	if d.cfg.Rate > 0 {
		r := newRand(d.cfg.Seed ^ 0xa441)
		var mu sync.Mutex
		next := start
		arrivals = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			next = next.Add(time.Duration(r.ExpFloat64() / d.cfg.Rate * 1e9))
			return next
		}
	}
	hists := make([][NumPhases]*hdrhistogram.Histogram, d.cfg.Workers)
	errs := make([]error, d.cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < d.cfg.Workers; w++ {
		for p := range hists[w] {
			hists[w][p] = NewHistogram()
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs[w] = d.worker(ctx, &hists[w], arrivals)
		}(w)
	}
	wg.Wait()
	end := time.Now()
	res := &Result{Salts: d.salts}
	for p := range res.Latency {
		res.Latency[p] = NewHistogram()
		for w := range hists {
			res.Latency[p].Merge(hists[w][p])
		}
	}
	d.mu.Lock()
	res.Budgets, res.TenantHeld = d.alloc, append([]int64(nil), d.res.tenantHeld...)
	res.WarmupTimedOut = d.timedOut
	res.Stalled = d.stalled
	res.Interrupted = parent.Err() != nil && !d.done
	res.Cut = parent.Err() == nil && !d.done
	res.Warmed = d.warmed
	res.Queue = d.queue.stats()
	res.Total = d.c.clone()
	if d.warmed {
		res.Counters = d.c.Sub(d.warm)
		res.Elapsed = end.Sub(d.warmAt)
	} else {
		// Warm-up never ended: report the whole run rather than nothing.
		res.Counters = d.c.clone()
		res.Elapsed = end.Sub(start)
	}
	d.mu.Unlock()
	return res, errors.Join(errs...)
}

func (d *Driver) worker(ctx context.Context, h *[NumPhases]*hdrhistogram.Histogram, arrivals func() time.Time) error {
	var w work
	var phase int64
	ok := make([]bool, 0, 64)
	for {
		if ctx.Err() != nil {
			return nil
		}
		if !d.nextOp(&w) {
			return nil
		}
		if p := d.phase.Load(); p != phase {
			phase = p
			for _, x := range h {
				x.Reset()
			}
		}
		w.start = time.Now()
		due := arrivals != nil || (d.cfg.Speed > 0 && w.op.At > 0)
		if due {
			var at time.Time
			if arrivals != nil {
				at = arrivals()
			} else {
				at = d.start.Add(time.Duration(float64(w.op.At) / d.cfg.Speed))
			}
			if dl := time.Until(at); dl > 0 {
				select {
				case <-time.After(dl):
				case <-ctx.Done():
					return nil
				}
			}
			// Latency counts from the scheduled arrival, so queueing behind slow requests
			// shows up (no coordinated omission).
			w.start = at
		}
		var err error
		switch w.op.Kind {
		case KindRequest, KindGet:
			err = d.request(h, &w, &ok)
		case KindPut:
			if w.op.NodeOp {
				// A node's write: a chunk it holds is kept (put_many skips indexed keys),
				// a new one stored if the admission policy admits it.
				err = d.store(h, w.keys, 0, w.op.Size, &ok)
			} else {
				err = d.overwrite(h, w.keys, w.op.Size, &ok)
			}
		case KindDelete:
			err = d.delete(h, w.keys)
		}
		if err != nil {
			d.mu.Lock()
			d.c.Errors++
			d.mu.Unlock()
			return fmt.Errorf("%s op: %w", w.op.Kind, err)
		}
		h[PhaseRequest].RecordValue(int64(time.Since(w.start)))
		if due || d.cfg.Speed > 0 {
			d.queue.add(w.start.Sub(d.start), time.Since(d.start))
		}
	}
}

// nextOp pulls the next op from the generator under the lock and copies its keys.
func (d *Driver) nextOp(w *work) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return false
	}
	if d.cfg.StallOps > 0 {
		if d.c.BytesWritten != d.lastW {
			d.lastW, d.idleOps = d.c.BytesWritten, 0
		} else if d.idleOps++; d.idleOps > d.cfg.StallOps {
			d.stalled, d.done = true, true
			return false
		}
	}
	if (d.cfg.MaxOps > 0 && d.c.Ops >= d.cfg.MaxOps) ||
		(d.cfg.StopAfterBytes > 0 && d.c.BytesWritten >= d.cfg.StopAfterBytes) || !d.gen.Next(&w.op) {
		d.done = true
		return false
	}
	w.keys = append(w.keys[:0], w.op.Keys...)
	if d.cfg.SampleOps > 0 && d.cfg.Sample != nil && d.c.Ops > 0 && d.c.Ops%d.cfg.SampleOps == 0 {
		d.cfg.Sample(d.c.clone())
	}
	d.c.Ops++
	t := w.op.Tenant
	if w.op.Kind == KindRequest {
		d.c.Requests++
		if int(t) < len(d.c.TenantRequests) {
			d.c.TenantRequests[t]++
		}
	}
	return true
}

func timed(h *hdrhistogram.Histogram, f func() error) error {
	t := time.Now()
	err := f()
	h.RecordValue(int64(time.Since(t)))
	return err
}

// request: lookup-and-lock the longest cached prefix, load it, unlock, store the rest.
func (d *Driver) request(h *[NumPhases]*hdrhistogram.Histogram, w *work, ok *[]bool) error {
	keys := w.keys
	if len(keys) == 0 {
		return nil
	}
	var hits int
	if err := timed(h[PhaseLookup], func() (err error) { hits, err = d.be.Lookup(keys); return }); err != nil {
		return err
	}
	d.mu.Lock()
	t := w.op.Tenant
	d.c.ChunksRequested += int64(len(keys))
	d.c.ChunksHit += int64(hits)
	d.c.countRequest(&w.op, len(keys), hits)
	if d.adm != nil && (w.op.Kind == KindRequest || w.op.NodeOp) {
		for _, k := range keys {
			d.adm.Seen(admKey(k))
		}
	}
	if int(t) < len(d.c.TenantChunksHit) {
		d.c.TenantChunksHit[t] += int64(hits)
		d.c.TenantChunksRequested[t] += int64(len(keys))
	}
	for _, k := range keys[:hits] {
		if i, found := d.res.idx[k]; found {
			d.res.ents[i].pins++
			if d.cfg.Eviction.refreshes() && !d.res.ents[i].pending {
				d.res.touchHit(i)
			}
		}
	}
	d.mu.Unlock()
	var loaded int
	var lerr error
	if hits > 0 {
		lerr = timed(h[PhaseLoad], func() (err error) { loaded, err = d.be.Load(keys[:hits], w.op.Size); return })
		d.be.Unlock(keys[:hits])
	}
	d.mu.Lock()
	for _, k := range keys[:hits] {
		if i, found := d.res.idx[k]; found && d.res.ents[i].pins > 0 {
			d.res.ents[i].pins--
		}
	}
	d.c.ChunksLoaded += int64(loaded)
	d.c.BytesRead += int64(loaded) * int64(w.op.Size)
	d.mu.Unlock()
	if lerr != nil {
		return lerr
	}
	if w.op.Kind == KindGet || w.op.ReadOnly || hits == len(keys) {
		return nil
	}
	return d.store(h, keys[hits:], hits, w.op.Size, ok)
}

// overwrite is a put: a key the cache holds is deleted (and its slot deallocated) and then
// stored again, as a key-value update through the engine's put_many (which skips indexed
// keys) has to be done. Keys a running request has locked are left alone.
func (d *Driver) overwrite(h *[NumPhases]*hdrhistogram.Histogram, keys []Key, size int, okp *[]bool) error {
	d.mu.Lock()
	var old []Key
	for _, k := range keys {
		if i, found := d.res.idx[k]; found && !d.res.ents[i].pending && d.res.ents[i].pins == 0 {
			d.res.remove(k)
			old = append(old, k)
		}
	}
	ticket := d.issueDelete(old)
	d.mu.Unlock()
	if err := d.finishDelete(h, old, ticket); err != nil {
		return err
	}
	return d.store(h, keys, -1, size, okp)
}

// store writes the keys the cache does not hold yet, evicting and expiring first. pos is
// the index of keys[0] in its request, for the admission policy; -1 for a put (always
// stored).
func (d *Driver) store(h *[NumPhases]*hdrhistogram.Histogram, keys []Key, pos, size int, okp *[]bool) error {
	d.mu.Lock()
	missing := make([]Key, 0, len(keys))
	room := int64(0)
	if len(keys) > 0 {
		room = max(1, d.res.limit[d.res.class(keys[0].Tenant)]/2)
	}
	adm := d.admitter(keys, pos)
	for i, k := range keys {
		// A prompt longer than the whole cache (or its tenant's budget) keeps only its
		// leading chunks, as a cache of that size would end up holding after evicting the
		// request's own tail.
		if int64(len(missing)) >= room {
			d.c.StoreSkipped += int64(len(keys) - i)
			break
		}
		if adm != nil && !adm(i, k) {
			continue
		}
		if d.res.reserve(k) {
			missing = append(missing, k)
		}
	}
	victims := d.evict(keys, d.expire(nil))
	ticket := d.issueDelete(victims)
	upTo := d.delTicket
	d.mu.Unlock()
	if err := d.finishDelete(h, victims, ticket); err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	d.waitDeletes(upTo)
	ok := (*okp)[:0]
	for range missing {
		ok = append(ok, false)
	}
	*okp = ok
	err := timed(h[PhaseStore], func() error { return d.be.Store(missing, size, ok) })
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, k := range missing {
		ttl := int(k.Tenant) < len(d.cfg.TTL) && d.cfg.TTL[k.Tenant] > 0
		d.res.commit(k, ok[i], d.c.BytesWritten, ttl)
		if ok[i] {
			d.c.ChunksStored++
			d.c.BytesWritten += int64(size)
			if int(k.Tenant) < len(d.c.TenantBytesWritten) {
				d.c.TenantBytesWritten[k.Tenant] += int64(size)
			}
		} else {
			d.c.StoreFailed++
		}
	}
	d.afterWriteLocked()
	return err
}

// expire collects chunks whose tenant TTL has passed (lock held).
func (d *Driver) expire(out []Key) []Key {
	for t, ttl := range d.cfg.TTL {
		if ttl <= 0 || t >= len(d.res.ttlq) {
			continue
		}
		before := len(out)
		out = d.res.expired(t, d.c.BytesWritten-int64(ttl*float64(d.capBytes)), out)
		d.c.Expired += int64(len(out) - before)
	}
	return out
}

// afterWriteLocked handles the warm-up boundary and samples (lock held).
func (d *Driver) afterWriteLocked() {
	if !d.warmed && d.c.BytesWritten >= d.cfg.WarmupBytes {
		d.warmLocked()
	}
	if d.cfg.Sample != nil && d.cfg.SampleBytes > 0 {
		for d.c.BytesWritten >= d.nextSamp {
			d.cfg.Sample(d.c.clone())
			d.nextSamp += d.cfg.SampleBytes
		}
	}
}

// warmLocked starts the measured window (lock held).
func (d *Driver) warmLocked() {
	d.warmed = true
	d.warm = d.c.clone()
	d.warmAt = time.Now()
	d.phase.Add(1)
	close(d.warmCh)
	if d.cfg.OnWarm != nil {
		d.cfg.OnWarm()
	}
}
