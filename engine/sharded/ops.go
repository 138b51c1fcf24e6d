package sharded

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rbctl/rbctl/engine"
)

// The batched calls: split the keys per shard, run each shard's part (concurrently when
// more than one shard has keys), put the results back in the caller's order.

// split returns, per shard, the indexes of keys routed to it (nil for one shard without a
// rank map: all keys), and the indexes of keys no shard serves (ErrNoShard).
func (c *Cache) split(keys []engine.Key) (parts [][]int, none []int) {
	if len(c.shards) == 1 && c.rankShard == nil {
		return nil, nil
	}
	parts = make([][]int, len(c.shards))
	for i, k := range keys {
		s, ok := c.shardOf(k)
		if !ok {
			none = append(none, i)
			continue
		}
		parts[s] = append(parts[s], i)
	}
	return parts, none
}

// run calls f for every shard with keys: f(shard, idx) with idx nil meaning every key.
// Shards run concurrently; the last one runs on the caller's goroutine.
func run(parts [][]int, f func(s int, idx []int)) {
	if parts == nil {
		f(0, nil)
		return
	}
	var wg sync.WaitGroup
	last := -1
	for s, idx := range parts {
		if len(idx) == 0 {
			continue
		}
		if last >= 0 {
			wg.Add(1)
			go func(s int, idx []int) { defer wg.Done(); f(s, idx) }(last, parts[last])
		}
		last = s
	}
	if last >= 0 {
		f(last, parts[last])
	}
	wg.Wait()
}

func pick[T any](all []T, idx []int) []T {
	if idx == nil {
		return all
	}
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = all[i]
	}
	return out
}

func at(idx []int, j int) int {
	if idx == nil {
		return j
	}
	return idx[j]
}

func (c *Cache) emit(s int, op Op, keys, ok int, bytes int64, t0 time.Time, err error) {
	if c.observe == nil {
		return
	}
	end := time.Now()
	c.observe(Event{Shard: s, Op: op, Keys: keys, OK: ok, Bytes: bytes, End: end, Duration: end.Sub(t0), Err: err})
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// PutMany is engine.PutMany over the shards: Results in the caller's order, Stored
// ascending. A shard's error fails only its keys and is returned as a *ShardError (joined).
func (c *Cache) PutMany(keys []engine.Key, payloads [][]byte) (engine.PutResult, error) {
	return c.PutManyMeta(keys, payloads, nil)
}

// PutManyMeta is PutMany with per-key tensor metadata (metas may be nil).
func (c *Cache) PutManyMeta(keys []engine.Key, payloads [][]byte, metas []*engine.ObjMeta) (engine.PutResult, error) {
	return c.PutManyWith(keys, payloads, engine.PutOptions{Metas: metas})
}

// PutManyWith is engine.PutManyWith over the shards.
func (c *Cache) PutManyWith(keys []engine.Key, payloads [][]byte, o engine.PutOptions) (engine.PutResult, error) {
	metas := o.Metas
	if len(keys) != len(payloads) || (metas != nil && len(metas) != len(keys)) {
		return c.shards[0].PutManyWith(keys, payloads, o) // the engine's own argument error
	}
	res := engine.PutResult{Results: make([]bool, len(keys))}
	parts, none := c.split(keys)
	errs := make([]error, len(c.shards), len(c.shards)+1)
	errs = append(errs, c.noShard(keys, none))
	var mu sync.Mutex
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		var m []*engine.ObjMeta
		if metas != nil {
			m = pick(metas, idx)
		}
		p := pick(payloads, idx)
		so := o
		so.Metas = m
		r, err := c.shards[s].PutManyWith(pick(keys, idx), p, so)
		var bytes int64
		for _, j := range r.Stored {
			bytes += int64(len(p[j]))
		}
		errs[s] = c.shardErr(s, err)
		c.emit(s, OpPut, len(p), count(r.Results), bytes, t0, err)
		mu.Lock()
		for j, ok := range r.Results {
			res.Results[at(idx, j)] = ok
		}
		for _, j := range r.Stored {
			res.Stored = append(res.Stored, at(idx, j))
		}
		mu.Unlock()
	})
	slices.Sort(res.Stored)
	return res, errors.Join(errs...)
}

// LoadManyInto is engine.LoadManyInto over the shards. A shard's device error fails only
// its keys (false) and is returned as a *ShardError (joined).
func (c *Cache) LoadManyInto(keys []engine.Key, bufs [][]byte) ([]bool, error) {
	return c.LoadManyIntoWith(keys, bufs, engine.LoadOptions{})
}

// LoadManyIntoWith is engine.LoadManyIntoWith over the shards.
func (c *Cache) LoadManyIntoWith(keys []engine.Key, bufs [][]byte, o engine.LoadOptions) ([]bool, error) {
	if len(keys) != len(bufs) {
		return c.shards[0].LoadManyIntoWith(keys, bufs, o)
	}
	out := make([]bool, len(keys))
	parts, none := c.split(keys)
	errs := make([]error, len(c.shards), len(c.shards)+1)
	errs = append(errs, c.noShard(keys, none))
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		kk := pick(keys, idx)
		ok, err := c.shards[s].LoadManyIntoWith(kk, pick(bufs, idx), o)
		var bytes int64
		n := 0
		for j, good := range ok {
			if good {
				out[at(idx, j)] = true
				n++
				if c.observe == nil {
					continue
				}
				if m, found := c.shards[s].Lookup(kk[j]); found {
					bytes += int64(m.Size)
				}
			}
		}
		errs[s] = c.shardErr(s, err)
		c.emit(s, OpLoad, len(kk), n, bytes, t0, err)
	})
	return out, errors.Join(errs...)
}

// LoadMany is engine.LoadMany over the shards: out in the caller's order.
func (c *Cache) LoadMany(keys []engine.Key, alloc func(size int) []byte) ([][]byte, error) {
	if len(c.shards) == 1 && c.rankShard == nil { // one shard takes every key: no split (a RESP GET's path)
		t0 := time.Now()
		got, err := c.shards[0].LoadMany(keys, alloc)
		var bytes int64
		n := 0
		for _, b := range got {
			if b != nil {
				bytes += int64(len(b))
				n++
			}
		}
		err = c.shardErr(0, err)
		c.emit(0, OpLoad, len(keys), n, bytes, t0, err)
		if err != nil {
			err = errors.Join(err) // as the general path returns it
		}
		return got, err
	}
	out := make([][]byte, len(keys))
	parts, none := c.split(keys)
	errs := make([]error, len(c.shards), len(c.shards)+1)
	errs = append(errs, c.noShard(keys, none))
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		kk := pick(keys, idx)
		got, err := c.shards[s].LoadMany(kk, alloc)
		var bytes int64
		n := 0
		for j, b := range got {
			if b != nil {
				out[at(idx, j)] = b
				bytes += int64(len(b))
				n++
			}
		}
		errs[s] = c.shardErr(s, err)
		c.emit(s, OpLoad, len(kk), n, bytes, t0, err)
	})
	return out, errors.Join(errs...)
}

// ExistsMany is engine.ExistsMany over the shards.
func (c *Cache) ExistsMany(keys []engine.Key, lock bool) []bool {
	out := make([]bool, len(keys))
	parts, _ := c.split(keys) // a key no shard serves is a miss
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		hit := c.shards[s].ExistsMany(pick(keys, idx), lock)
		for j, h := range hit {
			out[at(idx, j)] = h
		}
		c.emit(s, OpExists, len(hit), count(hit), 0, t0, nil)
	})
	return out
}

// MetadataPrefix is engine.MetadataPrefix over the shards: the metadata of the leading
// hits of keys, locked when lock is set. Each shard finds its own leading hits; the prefix
// ends at the first key any shard missed, and locks taken past it are released.
func (c *Cache) MetadataPrefix(keys []engine.Key, lock bool) []engine.EntryMeta {
	parts, none := c.split(keys)
	if parts == nil {
		t0 := time.Now()
		m := c.shards[0].MetadataPrefix(keys, lock)
		c.emit(0, OpMetadata, len(keys), len(m), 0, t0, nil)
		return m
	}
	got := make([][]engine.EntryMeta, len(c.shards))
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		got[s] = c.shards[s].MetadataPrefix(pick(keys, idx), lock)
		c.emit(s, OpMetadata, len(idx), len(got[s]), 0, t0, nil)
	})
	end := len(keys)
	if len(none) > 0 { // a key no shard serves is a miss: the prefix ends there
		end = none[0]
	}
	for s, idx := range parts {
		if len(got[s]) < len(idx) {
			end = min(end, idx[len(got[s])])
		}
	}
	out := make([]engine.EntryMeta, end)
	for s, idx := range parts {
		var extra []engine.Key
		for j, m := range got[s] {
			if i := idx[j]; i < end {
				out[i] = m
			} else {
				extra = append(extra, keys[i])
			}
		}
		if lock && len(extra) > 0 {
			c.shards[s].UnlockMany(extra)
		}
	}
	return out
}

// UnlockMany is engine.UnlockMany over the shards.
func (c *Cache) UnlockMany(keys []engine.Key) {
	parts, _ := c.split(keys)
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		kk := pick(keys, idx)
		c.shards[s].UnlockMany(kk)
		c.emit(s, OpUnlock, len(kk), len(kk), 0, t0, nil)
	})
}

// DeleteMany is engine.DeleteMany over the shards.
func (c *Cache) DeleteMany(keys []engine.Key, force bool) []bool {
	out := make([]bool, len(keys))
	parts, _ := c.split(keys) // a key no shard serves is not there to delete
	run(parts, func(s int, idx []int) {
		t0 := time.Now()
		r := c.shards[s].DeleteMany(pick(keys, idx), force)
		for j, v := range r {
			out[at(idx, j)] = v
		}
		c.emit(s, OpDelete, len(r), count(r), 0, t0, nil)
	})
	return out
}

// Lookup returns one key's metadata from its shard.
func (c *Cache) Lookup(k engine.Key) (engine.EntryMeta, bool) {
	s, ok := c.shardOf(k)
	if !ok {
		return engine.EntryMeta{}, false
	}
	return c.shards[s].Lookup(k)
}

// Identities calls fn with the identity of each indexed entry of every shard, shard by
// shard, until fn returns false (engine.Engine.Identities).
func (c *Cache) Identities(fn func(uint64) bool) {
	for _, e := range c.shards {
		more := true
		e.Identities(func(id uint64) bool { more = fn(id); return more })
		if !more {
			return
		}
	}
}

// Entries calls fn for each indexed entry of every shard, shard by shard, until fn
// returns false.
func (c *Cache) Entries(fn func(shard int, k engine.Key, m engine.EntryMeta) bool) {
	for s, e := range c.shards {
		more := true
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool { more = fn(s, k, m); return more })
		if !more {
			return
		}
	}
}
