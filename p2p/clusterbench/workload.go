package clusterbench

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/node"
)

// model is the model name every key carries (LMCache's ObjectKey model field).
const model = "cluster-bench"

// workload draws requests: a tenant (uniformly, from the seed) whose shared prefix comes
// first, then chunks no other request has.
type workload struct {
	o   Options
	rng *rand.Rand
}

func newWorkload(o Options) *workload {
	return &workload{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))}
}

// request returns request r's keys in prompt order.
func (w *workload) request(r int) []engine.Key {
	t := w.rng.IntN(w.o.Tenants)
	salt := fmt.Sprintf("tenant-%02d", t)
	keys := make([]engine.Key, 0, w.o.PrefixChunks+w.o.UniqueChunks)
	for i := range w.o.PrefixChunks {
		keys = append(keys, engine.ObjectKey(model, 0, chunkHash('p', uint64(t), uint64(i)), salt))
	}
	for i := range w.o.UniqueChunks {
		keys = append(keys, engine.ObjectKey(model, 0, chunkHash('u', uint64(r), uint64(i)), salt))
	}
	return keys
}

func chunkHash(kind byte, a, b uint64) []byte {
	h := make([]byte, 17)
	h[0] = kind
	binary.LittleEndian.PutUint64(h[1:], a)
	binary.LittleEndian.PutUint64(h[9:], b)
	return h
}

// payload is the chunk a key's "computation" yields: a pattern seeded by its identity, so
// every node computes the same bytes and a wrong byte from anywhere is detected.
func payload(k engine.Key, n int) []byte {
	p := make([]byte, n)
	s := k.Identity() | 1
	for i := 0; i+8 <= n; i += 8 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		binary.LittleEndian.PutUint64(p[i:], s)
	}
	return p
}

// serve runs one request on mb: get the chunks, use the leading prefix of hits, compute
// and store the rest (evicting the least recently used keys to make room).
func serve(ctx context.Context, mb *member, keys []engine.Key, localOnly bool, chunk int) error {
	makeRoom(mb, 2*len(keys))
	res, err := mb.node.Get(ctx, keys, localOnly)
	if err != nil {
		return err
	}
	mb.m.Requests++
	mb.m.Chunks += int64(len(keys))
	prefix := true
	var compute []int
	for i, r := range res {
		if r.Source != node.Miss {
			if !bytes.Equal(r.Payload, payload(keys[i], chunk)) {
				mb.m.WrongChunks++
				prefix = false // a wrong chunk is never used
			}
			mb.lru.touch(keys[i])
		}
		switch {
		case prefix && r.Source == node.Local:
			mb.m.LocalHits++
		case prefix && r.Source == node.Peer:
			mb.m.PeerHits++
		case r.Source == node.Miss:
			prefix = false
			compute = append(compute, i)
		default: // a hit after the first miss: LMCache recomputes it, but it is already stored
			mb.m.Recomputed++
		}
	}
	if len(compute) == 0 {
		return nil
	}
	ks, ps := make([]engine.Key, len(compute)), make([][]byte, len(compute))
	for j, i := range compute {
		ks[j], ps[j] = keys[i], payload(keys[i], chunk)
	}
	mb.m.Computed += int64(len(ks))
	pr, err := mb.node.Put(ks, ps)
	if err != nil {
		return err
	}
	for _, j := range pr.Stored {
		mb.lru.touch(ks[j])
	}
	mb.m.NotStored += int64(len(ks) - len(pr.Stored))
	return nil
}

// makeRoom evicts least recently used keys until need slots are free.
func makeRoom(mb *member, need int) {
	for {
		u := mb.eng.Usage()
		if u.SlotsTotal-u.SlotsUsed-u.SlotsInflight >= int64(need) {
			return
		}
		k, ok := mb.lru.oldest()
		if !ok {
			return
		}
		mb.node.Delete([]engine.Key{k}, false)
		mb.m.Evicted++
	}
}

// lru orders keys by last use; replicas a node stored after a peer fetch enter it when the
// request that fetched them touches them.
type lru struct {
	l *list.List
	m map[uint64]*list.Element
}

func newLRU() *lru { return &lru{l: list.New(), m: map[uint64]*list.Element{}} }

func (c *lru) touch(k engine.Key) {
	if e, ok := c.m[k.Identity()]; ok {
		c.l.MoveToFront(e)
		return
	}
	c.m[k.Identity()] = c.l.PushFront(k)
}

func (c *lru) oldest() (engine.Key, bool) {
	e := c.l.Back()
	if e == nil {
		return engine.Key{}, false
	}
	c.l.Remove(e)
	k := e.Value.(engine.Key)
	delete(c.m, k.Identity())
	return k, true
}
