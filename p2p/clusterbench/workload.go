package clusterbench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/workloads"
)

// model is the model name every key carries (LMCache's ObjectKey model field).
const model = "cluster-bench"

// workload draws requests: a tenant (uniformly, from the seed) whose shared prefix comes
// first, then chunks no other request has; or a trace's requests in order.
type workload struct {
	o     Options
	rng   *rand.Rand
	route *rand.Rand
	gen   workloads.Generator // a trace replay; nil for the tenants
}

func newWorkload(o Options) *workload {
	w := &workload{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed)), route: rand.New(rand.NewPCG(o.Seed, 0x7007e))}
	if o.trace != nil {
		w.gen = o.trace.Replay(o.ChunkTokens, o.ChunkBytes, 1)
	}
	if o.recording != nil {
		w.gen, _ = o.recording.New()
	}
	return w
}

// readTrace reads the Mooncake trace or the node's recording o.Workload names.
func (o *Options) readTrace() error {
	if strings.HasPrefix(o.Workload, "l2trace:") {
		// Each get or peer fetch is a one-chunk request (a miss computes and puts the
		// chunk): the recording's client, replayed over the cluster.
		src, err := workloads.Spec{Kind: o.Workload, Model: "tiny", ChunkTokens: 256, L2Replay: workloads.L2Misses}.Build()
		if err != nil {
			return err
		}
		o.recording = src
		if o.Requests == 0 {
			o.Requests = int(src.Recorded.Gets + src.Recorded.Fetches)
		}
		o.fitRecording(src.Recorded)
		return nil
	}
	path, ok := strings.CutPrefix(o.Workload, "mooncake:")
	if !ok {
		return fmt.Errorf("cluster bench: workload %q is not mooncake:FILE or l2trace:FILE", o.Workload)
	}
	if err := workloads.CheckChunkTokens(o.ChunkTokens); err != nil {
		return err
	}
	sb, err := workloads.ParseSaltBy(cmp.Or(o.SaltBy, "root"))
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if o.trace, err = workloads.ReadMooncake(f, sb); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if o.Requests == 0 {
		o.Requests = int(o.trace.Stats.Requests)
	}
	// The report's trace figures are those of the requests replayed.
	o.trace = o.trace.Window(int64(o.Requests))
	return nil
}

// request returns request r's keys in prompt order and the node it goes to (mod the node
// count); false when a trace has no more.
func (w *workload) request(r int) ([]engine.Key, int, bool) {
	if w.gen != nil {
		return w.traceRequest(r)
	}
	t := w.rng.IntN(w.o.Tenants)
	salt := fmt.Sprintf("tenant-%02d", t)
	keys := make([]engine.Key, 0, w.o.PrefixChunks+w.o.UniqueChunks)
	for i := range w.o.PrefixChunks {
		keys = append(keys, engine.ObjectKey(model, 0, chunkHash('p', uint64(t), uint64(i)), salt))
	}
	for i := range w.o.UniqueChunks {
		keys = append(keys, engine.ObjectKey(model, 0, chunkHash('u', uint64(r), uint64(i)), salt))
	}
	return keys, w.node(r, uint64(t)), true
}

// traceRequest is the trace's next request; a session is its tenant (--salt-by).
func (w *workload) traceRequest(r int) ([]engine.Key, int, bool) {
	var op workloads.Op
	for {
		if !w.gen.Next(&op) {
			return nil, 0, false
		}
		if op.Kind == workloads.KindRequest { // a recording's deletes are not requests
			break
		}
	}
	salt := w.gen.Salts()[op.Tenant]
	keys := make([]engine.Key, len(op.Keys))
	for i, k := range op.Keys {
		keys[i] = engine.ObjectKey(model, 0, binary.BigEndian.AppendUint64(nil, k.Hash), salt)
	}
	return keys, w.node(r, saltHash(salt)), true
}

// node is where request r of session s goes (mod the node count).
func (w *workload) node(r int, s uint64) int {
	switch w.o.Route {
	case Session:
		s ^= s >> 33
		s *= 0xff51afd7ed558ccd
		s ^= s >> 33
		return int(s >> 1)
	case Random:
		return w.route.IntN(1 << 30)
	}
	return r
}

// saltHash is a tenant's session identity for routing (FNV-1a 64).
func saltHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
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
// and store the rest (the node evicts its least recently used keys to make room).
func serve(ctx context.Context, mb *member, keys []engine.Key, localOnly bool, chunk int) error {
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
	mb.m.NotStored += int64(len(ks) - len(pr.Stored) - len(pr.Declined))
	return nil
}

// fitRecording takes the recording node's cache where o.Fit says so (Options.Fit).
func (o *Options) fitRecording(rd *workloads.Recorded) {
	var s workloads.Spec
	o.notes = rd.Policies(workloads.Fit{Admission: o.Fit.Admission}, &s)
	if s.Admission != "" {
		o.Admission = s.Admission
	}
	if o.Fit.Eviction {
		switch ev := node.Eviction(rd.Eviction); ev {
		case node.EvictLRU, node.EvictFIFO:
			o.eviction = ev
			o.notes = append(o.notes, "eviction "+rd.Eviction+" as the recording node's")
		default:
			o.notes = append(o.notes, fmt.Sprintf("the recording node's eviction %q is not replayed; lru", rd.Eviction))
		}
	}
	if o.Fit.Size && rd.Capacity.Slots > 0 {
		o.nodeSlots = (rd.Capacity.Slots + int64(rd.Nodes) - 1) / int64(max(rd.Nodes, 1))
		o.notes = append(o.notes, fmt.Sprintf("the recording node's %d slots on every node (chunks of %d bytes; the engine's capacity, on a device at least as large)", o.nodeSlots, o.ChunkBytes))
	}
}

// capacity is the part of a node's device its engine uses.
type capacity struct{ CapacityBytes, MetaTotalBytes int64 }

// nodeLayout is the capacity whose engine (default header and alignment, the metadata
// region format's auto sizing gives it) has exactly slots slots of chunk-byte payloads.
func nodeLayout(slots int64, chunk int) capacity {
	c := engine.DefaultConfig()
	slot := int64(engine.DefaultHeaderBytes + chunk)
	meta := engine.MetaBytesFor(slots*slot, slot, c.BlockAlign, c.CheckpointFormat)
	for { // the region grows with the capacity it serves: stop where it no longer does
		next := engine.MetaBytesFor(meta+slots*slot, slot, c.BlockAlign, c.CheckpointFormat)
		if next <= meta {
			return capacity{meta + slots*slot, meta}
		}
		meta = next
	}
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
