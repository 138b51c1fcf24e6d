package workloads

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rbctl/rbctl/workloads/l2trace"
)

// Replaying a node's recording (--workload l2trace:FILE[,FILE...]; docs/record.md), at the
// recorded times (Op.At; DriverConfig.Speed replays them), as node calls (Op.NodeOp):
//
//   - L2Recorded (default): every get and peer fetch is a KindGet of its chunk (lookup,
//     load a hit), every set a KindPut (a held chunk is kept, a new one goes through the
//     admission policy), every delete a KindDelete.
//   - L2Misses: every get and fetch is a one-chunk request that stores the chunk when it
//     misses in the replay (through the admission policy), and recorded sets are not
//     replayed: what a client that writes after a miss (LMCache's lookup, then store) would
//     have sent to the replayed cache. Use it to compare admission policies: replaying the
//     recorded sets shows a policy only the writes the recording node's misses caused.
//
// An exists changes no cache state but admission's and is not replayed; a failed
// operation is not replayed either; Recorded counts both.

// L2 replay modes (Spec.L2Replay).
const (
	L2Recorded = "recorded"
	L2Misses   = "misses"
)

// Recorded is what a recording says of itself and of the node that made it.
type Recorded struct {
	Files     []string
	Nodes     int
	Capacity  l2trace.Capacity // the nodes' slots summed: the cache a replay without size flags gets
	Eviction  string           // the first node's
	Admission string           // the first node's
	Records   int64
	Gets      int64 // get records (fetches are peers' reads, counted apart)
	GetHits   int64 // of them, hits at the node
	Fetches   int64
	Sets      int64
	Deletes   int64
	Exists    int64 // not replayed
	Failed    int64 // records of failed operations, not replayed
	Dropped   int64 // records the recorders lost
	Duration  time.Duration
}

// Fit says which parts of the recording node's cache a replay takes because the caller
// set none of its own: its slots (Size), its eviction, its admission policy.
type Fit struct {
	Size      bool
	Eviction  bool
	Admission bool
}

// Policies sets s's eviction and admission to the recording node's where f says so, and
// says what it took.
func (r *Recorded) Policies(f Fit, s *Spec) (notes []string) {
	if f.Eviction {
		switch ev := Eviction(r.Eviction); ev {
		case LRU, FIFO, Region:
			s.Eviction = ev
			notes = append(notes, "eviction "+r.Eviction+" as the recording node's")
		default:
			notes = append(notes, fmt.Sprintf("the recording node's eviction %q is not replayed; %s", r.Eviction, cmp.Or(s.Eviction, LRU)))
		}
	}
	if f.Admission && r.Admission != "" && CheckAdmission(r.Admission) == nil {
		s.Admission = r.Admission
		notes = append(notes, "admission "+r.Admission+" as the recording node's")
	}
	return notes
}

// FitUtil is the utilisation at which a cache of slots slots keeps exactly want (false when
// it has fewer).
func FitUtil(want, slots int64) (float64, bool) {
	if want <= 0 || slots < want {
		return 0, false
	}
	util := float64(want) / float64(slots)
	for TargetSlots(util, slots) < want {
		util = math.Nextafter(util, 2)
	}
	return min(util, 1), true
}

// Ops is the records a replay runs.
func (r *Recorded) Ops() int64 { return r.Gets + r.Fetches + r.Sets + r.Deletes }

// l2Replay is a recording as ops, compactly.
type l2Replay struct {
	kind  []Kind
	key   []Key
	size  []int32
	at    []int64 // ns since the first record
	salts []string
	max   int
}

// readL2 reads the recordings of spec (comma-separated paths) into a replay.
func readL2(spec, mode string) (*l2Replay, *Recorded, error) {
	misses := mode == L2Misses
	rg, err := l2trace.ReadFiles(strings.Split(spec, ",")...)
	if err != nil {
		return nil, nil, err
	}
	rd := &Recorded{Files: rg.Files, Nodes: len(rg.Nodes), Capacity: rg.Capacity(), Dropped: rg.Dropped, Records: int64(len(rg.Records))}
	if len(rg.Nodes) > 0 {
		rd.Eviction, rd.Admission = rg.Nodes[0].Eviction, rg.Nodes[0].Admission
	}
	r := &l2Replay{}
	saltIdx := map[string]int32{}
	var t0 time.Time
	for i, x := range rg.Records {
		if i == 0 {
			t0 = x.Time
		}
		rd.Duration = x.Time.Sub(t0)
		var k Kind
		switch {
		case x.Err != "":
			rd.Failed++
			continue
		case x.Op == l2trace.OpGet:
			rd.Gets++
			if x.Hit {
				rd.GetHits++
			}
			k = KindGet
		case x.Op == l2trace.OpFetch:
			rd.Fetches++
			k = KindGet
		case x.Op == l2trace.OpSet:
			rd.Sets++
			k = KindPut
			if misses {
				continue
			}
		case x.Op == l2trace.OpDelete:
			rd.Deletes++
			k = KindDelete
		default:
			rd.Exists++
			continue
		}
		ti, ok := saltIdx[x.Salt]
		if !ok {
			ti = int32(len(r.salts))
			saltIdx[x.Salt] = ti
			r.salts = append(r.salts, x.Salt)
		}
		size := int(min(x.Size, 1<<31-1))
		r.max = max(r.max, size)
		if k == KindGet && misses {
			k = KindRequest
		}
		r.kind = append(r.kind, k)
		r.key = append(r.key, Key{Hash: l2Key(x.Model, x.KVRank, x.Chunk), Tenant: ti})
		r.size = append(r.size, int32(size))
		r.at = append(r.at, int64(x.Time.Sub(t0)))
	}
	if len(r.kind) == 0 {
		return nil, nil, fmt.Errorf("%w: %s: no get, set, delete or fetch to replay", ErrSpec, spec)
	}
	if r.max == 0 {
		r.max = int(rd.Capacity.SlotBytes)
	}
	if r.max <= 0 {
		return nil, nil, fmt.Errorf("%w: %s: no record says how large a chunk is and the header gives no slot size", ErrSpec, spec)
	}
	return r, rd, nil
}

// l2Key is a recorded chunk's identity: its key's model, kv rank and chunk hash (FNV-1a
// 64), as the engine's key names a chunk; the salt is the Key's tenant.
func l2Key(model string, rank int, chunk string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range []string{model, "@", strconv.Itoa(rank), "@", chunk} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * 1099511628211
		}
	}
	return h
}

type l2Gen struct {
	r    *l2Replay
	i    int
	keys [1]Key
}

func (g *l2Gen) Salts() []string { return g.r.salts }
func (g *l2Gen) ChunkBytes() int { return g.r.max }

func (g *l2Gen) Next(op *Op) bool {
	r := g.r
	if g.i == len(r.kind) {
		return false
	}
	i := g.i
	g.i++
	g.keys[0] = r.key[i]
	size := int(r.size[i])
	if size == 0 { // a miss carries no size: the chunk's would be
		size = r.max
	}
	*op = Op{Kind: r.kind[i], Tenant: r.key[i].Tenant, Keys: g.keys[:], Size: size, At: time.Duration(r.at[i]), NodeOp: true}
	return true
}

// buildL2 reads the recordings of s.Kind into src.
func (s Spec) buildL2(src *Source) error {
	mode := cmp.Or(s.L2Replay, L2Recorded)
	if mode != L2Recorded && mode != L2Misses {
		return fmt.Errorf("%w: l2trace replay %q is not %s or %s", ErrSpec, mode, L2Recorded, L2Misses)
	}
	r, rd, err := readL2(strings.TrimPrefix(s.Kind, "l2trace:"), mode)
	if err != nil {
		return err
	}
	src.New = func() (Generator, error) { return &l2Gen{r: r}, nil }
	src.ChunkBytes, src.Salts, src.Recorded = r.max, r.salts, rd
	hit := 0.0
	if rd.Gets > 0 {
		hit = 100 * float64(rd.GetHits) / float64(rd.Gets)
	}
	src.Description = fmt.Sprintf("l2trace %s (replay %s): %d records over %.1f s from %d node(s) of %d slots of %d B (eviction %s, admission %s): "+
		"%d gets (%.2f %% hit at the node), %d peer fetches, %d sets, %d deletes; %d exists and %d failed not replayed; %d dropped by the recorder; %d salts",
		strings.Join(rd.Files, ","), mode, rd.Records, rd.Duration.Seconds(), rd.Nodes, rd.Capacity.Slots, rd.Capacity.SlotBytes, rd.Eviction, rd.Admission,
		rd.Gets, hit, rd.Fetches, rd.Sets, rd.Deletes, rd.Exists, rd.Failed, rd.Dropped, len(r.salts))
	return nil
}
