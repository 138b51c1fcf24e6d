package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rbctl/rbctl/placement"
)

// Oracle placements are future-knowledge references for rbctl simulate, not policies a
// device could run: the op stream is replayed twice (the simulated cache's decisions do not
// depend on placement), the first pass records what each data write will turn out to be,
// the second places every write by that record. They answer "how far could any placement
// policy get with this many handles if it knew X?":
//
//	oracle:lifetime         each write's actual lifetime (data writes until its delete or
//	                        eviction), salt-blind, in quantile classes over all data handles
//	oracle:salt-lifetime    cache-salt handles, and a salt whose lifetimes spread (its 90th
//	                        percentile over 1.1× its 10th) also split into lifetime classes
//	oracle:salt-frequency   the same split, by how often the key is requested over the whole
//	                        run (hits + stores): the best any popularity estimator could know
//
// Handle n-1 holds checkpoints (as metadata-class); data gets handles 0..n-2. Classes are
// quantiles by write count of the score, so each class of a salt receives about the same
// number of writes. Spare handles go to the salts with spread, heaviest writer first.
const OraclePrefix = "oracle:"

// OracleModes lists the oracle: specs RunOne accepts.
var OracleModes = []string{"lifetime", "salt-lifetime", "salt-frequency"}

// IsOracle reports whether spec names an oracle placement (simulate only).
func IsOracle(spec string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(spec)), OraclePrefix)
}

// CheckOracle returns the error RunOne would give for an oracle spec, before anything runs.
func CheckOracle(spec string, handles int) error {
	if _, err := parseOracle(spec); err != nil {
		return err
	}
	if handles < 2 {
		return fmt.Errorf("%w: %s needs at least 2 handles (one for checkpoints), device has %d", placement.ErrSpec, spec, handles)
	}
	return nil
}

func parseOracle(spec string) (string, error) {
	m := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(spec)), OraclePrefix)
	if !slices.Contains(OracleModes, m) {
		return "", fmt.Errorf("%w: unknown oracle %q; known: oracle:%s", placement.ErrSpec, spec, strings.Join(OracleModes, ", oracle:"))
	}
	return m, nil
}

// oracleWrite is what pass 1 learned about one data write, in write order.
type oracleWrite struct {
	id   uint64
	salt string
	died int64 // data-write index at its delete; -1 = still cached when the run ended
}

// oracleRecorder runs pass 1: it places like metadata-class+cache-salt and records every
// data write and every delete, and counts each key's requests.
type oracleRecorder struct {
	inner    placement.Policy
	writes   []oracleWrite
	resident map[uint64]int64 // identity → index of the write now cached
	requests map[uint64]int64 // identity → hits + stores over the run
	pending  uint64           // identity of the last Place (its Store follows)
}

func (p *oracleRecorder) Name() string { return "oracle-recorder" }

func (p *oracleRecorder) Place(w placement.Write) placement.Handle {
	if !w.Metadata {
		p.writes = append(p.writes, oracleWrite{id: w.Identity, salt: w.CacheSalt, died: -1})
		p.pending = w.Identity
	}
	return p.inner.Place(w)
}

func (p *oracleRecorder) Observe(id uint64, ev placement.Event) {
	switch ev {
	case placement.Store:
		if id == p.pending && len(p.writes) > 0 {
			p.resident[id] = int64(len(p.writes) - 1)
		}
		p.requests[id]++
	case placement.Lookup:
		p.requests[id]++
	case placement.Delete:
		if i, ok := p.resident[id]; ok {
			p.writes[i].died = int64(len(p.writes))
			delete(p.resident, id)
		}
	}
}

// oraclePolicy runs pass 2: write i goes to handle[i].
type oraclePolicy struct {
	name   string
	meta   placement.Handle
	handle []int32
	labels map[int]string
	next   int
}

func (p *oraclePolicy) Name() string { return p.name }

// HandleLabels implements placement.Labeler.
func (p *oraclePolicy) HandleLabels() map[int]string {
	out := map[int]string{int(p.meta): "metadata"}
	for h, l := range p.labels {
		out[h] = l
	}
	return out
}

func (p *oraclePolicy) Place(w placement.Write) placement.Handle {
	if w.Metadata {
		return placement.Handle(p.meta)
	}
	i := p.next
	p.next++
	if i >= len(p.handle) {
		return 0 // beyond pass 1 (caught as divergence after the run)
	}
	return placement.Handle(p.handle[i])
}

// oracleHandles assigns a handle to every recorded write for mode over n data handles and
// says what each handle holds.
func oracleHandles(mode string, ws []oracleWrite, requests map[uint64]int64, n int) ([]int32, map[int]string) {
	score := make([]float64, len(ws))
	for i, w := range ws {
		switch {
		case mode == "salt-frequency":
			score[i] = float64(requests[w.id])
		case w.died < 0:
			score[i] = math.Inf(1) // outlived the run
		default:
			score[i] = float64(w.died - int64(i))
		}
	}
	out := make([]int32, len(ws))
	labels := map[int]string{}
	what := "lifetime"
	if mode == "salt-frequency" {
		what = "frequency"
	}
	blind := func() ([]int32, map[int]string) {
		all := make([]int, len(ws))
		for i := range all {
			all[i] = i
		}
		classify(all, score, n, 0, out)
		for c := 0; c < n; c++ {
			labels[c] = fmt.Sprintf("%s class %d/%d", what, c+1, n)
		}
		return out, labels
	}
	if mode == "lifetime" {
		return blind()
	}
	// Group writes by salt, in first-seen order (cache-salt's assignment).
	var salts []string
	group := map[string][]int{}
	for i, w := range ws {
		if _, ok := group[w.salt]; !ok {
			salts = append(salts, w.salt)
		}
		group[w.salt] = append(group[w.salt], i)
	}
	if len(salts) > n { // not enough handles for one per salt: fall back to salt-blind classes
		return blind()
	}
	share := make([]int, len(salts))
	var spread []int
	for si, s := range salts {
		share[si] = 1
		if q := quantiles(group[s], score, []float64{0.1, 0.9}); q[1] > 1.1*q[0] {
			spread = append(spread, si)
		}
	}
	slices.SortStableFunc(spread, func(a, b int) int { return len(group[salts[b]]) - len(group[salts[a]]) })
	for extra := n - len(salts); extra > 0 && len(spread) > 0; extra-- {
		share[spread[(n-len(salts)-extra)%len(spread)]]++
	}
	base := 0
	for si, s := range salts {
		classify(group[s], score, share[si], base, out)
		for c := 0; c < share[si]; c++ {
			l := "salt " + s
			if s == "" {
				l = `salt "" (untagged)`
			}
			if share[si] > 1 {
				l += fmt.Sprintf(", %s class %d/%d", what, c+1, share[si])
			}
			labels[base+c] = l
		}
		base += share[si]
	}
	return out, labels
}

// classify puts the writes idx into k quantile classes of score, handles base..base+k-1,
// lowest scores first.
func classify(idx []int, score []float64, k, base int, out []int32) {
	if k <= 1 {
		for _, i := range idx {
			out[i] = int32(base)
		}
		return
	}
	fs := make([]float64, k-1)
	for j := range fs {
		fs[j] = float64(j+1) / float64(k)
	}
	cut := quantiles(idx, score, fs)
	for _, i := range idx {
		c, _ := slices.BinarySearch(cut, score[i])
		// BinarySearch finds the first cut >= score: scores equal to a cut stay below it.
		out[i] = int32(base + c)
	}
}

// quantiles of score over idx at the fractions fs (nearest rank).
func quantiles(idx []int, score []float64, fs []float64) []float64 {
	v := make([]float64, len(idx))
	for j, i := range idx {
		v[j] = score[i]
	}
	slices.Sort(v)
	q := make([]float64, len(fs))
	for j, f := range fs {
		if len(v) > 0 {
			q[j] = v[int(f*float64(len(v)-1))]
		}
	}
	return q
}

// runOracleSim runs r twice: pass 1 records, pass 2 places by the record and is the result.
func runOracle(ctx context.Context, r RunConfig) (*Result, error) {
	if err := CheckOracle(r.Policy, r.FTL.Handles); err != nil {
		return nil, err
	}
	mode, _ := parseOracle(r.Policy)
	if r.Regen == nil {
		return nil, errors.New("oracle placement needs RunConfig.Regen to replay the workload")
	}
	n := r.FTL.Handles - 1
	rec := &oracleRecorder{inner: placement.NewMetadataClass(r.FTL.Handles, placement.NewCacheSalt(n)),
		resident: map[uint64]int64{}, requests: map[uint64]int64{}}
	p1 := r
	p1.Policy, p1.PolicyImpl = "", rec
	r1, err := RunOne(ctx, p1)
	if err != nil {
		return nil, fmt.Errorf("oracle pass 1: %w", err)
	}
	if r1.Interrupted {
		// Pass 1 is a recording, not a result: nothing of this policy was measured.
		return nil, fmt.Errorf("oracle pass 1: %w", context.Cause(ctx))
	}
	handle, labels := oracleHandles(mode, rec.writes, rec.requests, n)
	pol := &oraclePolicy{name: OraclePrefix + mode, meta: placement.Handle(n), handle: handle, labels: labels}
	p2 := r
	if p2.Gen, err = r.Regen(); err != nil {
		return nil, err
	}
	p2.Policy, p2.PolicyImpl = "", pol
	res, err := RunOne(ctx, p2)
	if err != nil {
		return res, fmt.Errorf("oracle pass 2: %w", err)
	}
	if !res.Infeasible && !res.Interrupted && pol.next != len(pol.handle) {
		return res, fmt.Errorf("oracle: the replay made %d data writes, the recording %d: the op stream depends on placement", pol.next, len(pol.handle))
	}
	res.Policy = pol.name
	return res, nil
}
