package workloads

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Tenants of a request trace (docs/bench.md, "cache_salt"). A Mooncake trace names no
// tenant; a rule derives each request's cache_salt from its blocks. Hash ids are prefix
// hashes, so the id of a request's k-th block names its whole prefix up to k: a salt named
// by one id stands for a chain of blocks.
//
// The salt is part of a cached chunk's identity (as LMCache's cache_salt is part of its
// key): two tenants never share a chunk. A rule that puts requests sharing a block in
// different tenants therefore stores that block once per tenant and hits it less; the
// ceiling (TraceStats) is worked out per tenant, so it says what that costs.

// SaltBy is how a trace request's cache_salt is derived.
type SaltBy struct {
	// Rule is none (every request ""), root ("r" + its first id), hash ("h" + the root in
	// N buckets), prefix ("p" + the id of its N-th block: its first N blocks) or group
	// ("g" + the id of the block after its shared prompt; groupSalts).
	Rule string
	N    int // hash: buckets; prefix: blocks; group: the fan-out that makes a shared prompt
}

// DefaultGroupFanout is the fan-out of `group` without one: a block that 16 or more
// distinct blocks follow is a prompt many conversations share.
const DefaultGroupFanout = 16

// ParseSaltBy parses none, root, hash:N, prefix:N, group or group:F.
func ParseSaltBy(s string) (SaltBy, error) {
	rule, arg, hasArg := strings.Cut(s, ":")
	switch {
	case (rule == "none" || rule == "root") && !hasArg:
		return SaltBy{Rule: rule}, nil
	case rule == "group" && !hasArg:
		return SaltBy{Rule: rule, N: DefaultGroupFanout}, nil
	case rule == "hash" || rule == "prefix" || rule == "group":
		lim := map[string]int{"hash": 1 << 16, "prefix": 1 << 22, "group": 1 << 30}[rule]
		lo := 1
		if rule == "group" {
			lo = 2
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < lo || n > lim {
			return SaltBy{}, fmt.Errorf("%w: salt rule %q: %s:N wants N in %d..%d", ErrSpec, s, rule, lo, lim)
		}
		return SaltBy{Rule: rule, N: n}, nil
	}
	return SaltBy{}, fmt.Errorf("%w: salt rule %q is not none, root, hash:N, prefix:N, group or group:F", ErrSpec, s)
}

func (s SaltBy) String() string {
	switch {
	case s.Rule == "group" && s.N == DefaultGroupFanout:
		return "group"
	case s.Rule == "hash" || s.Rule == "prefix" || s.Rule == "group":
		return s.Rule + ":" + strconv.Itoa(s.N)
	}
	return s.Rule
}

// salts gives every request of t its tenant index and returns the salts in order of first
// use.
func (s SaltBy) salts(t *Mooncake) (tenant []int32, salts []string) {
	var fan map[uint64]int32
	if s.Rule == "group" {
		fan = fanout(t)
	}
	idx := map[string]int32{}
	tenant = make([]int32, len(t.at))
	for i := range t.at {
		ids := t.ids[t.off[i]:t.off[i+1]]
		var salt string
		switch s.Rule {
		case "root":
			salt = "r" + strconv.FormatUint(ids[0], 10)
		case "hash":
			salt = "h" + strconv.FormatUint(mix(ids[0])%uint64(s.N), 10)
		case "prefix":
			salt = "p" + strconv.FormatUint(ids[min(s.N, len(ids))-1], 10)
		case "group":
			salt = "g" + strconv.FormatUint(groupBlock(ids, fan, int32(s.N)), 10)
		}
		ti, ok := idx[salt]
		if !ok {
			ti = int32(len(salts))
			idx[salt] = ti
			salts = append(salts, salt)
		}
		tenant[i] = ti
	}
	return tenant, salts
}

// noParent is the parent of a root block in fanout.
const noParent = ^uint64(0)

// fanout counts, per block, the distinct blocks that follow it in some request (noParent:
// the distinct roots). A prefix hash has one parent; a trace that gives an id two is
// counted by its first.
func fanout(t *Mooncake) map[uint64]int32 {
	parent := map[uint64]uint64{}
	fan := map[uint64]int32{}
	for i := range t.at {
		p := noParent
		for _, id := range t.ids[t.off[i]:t.off[i+1]] {
			if _, ok := parent[id]; !ok {
				parent[id] = p
				fan[p]++
			}
			p = id
		}
	}
	return fan
}

// groupBlock is the block that names a request's group: the one after the deepest block of
// its chain that f or more distinct blocks follow (its shared prompt: a system prompt or
// document many conversations start from), or its root when no block of its chain does.
// Every request of a group shares the chain up to that block: a conversation's turns (each
// resends the one before) stay together, conversations that share only the prompt part.
// A request that ends inside its shared prompt is the prompt's own group.
func groupBlock(ids []uint64, fan map[uint64]int32, f int32) uint64 {
	g := ids[0]
	for k, id := range ids {
		if fan[id] >= f {
			g = ids[min(k+1, len(ids)-1)]
		}
	}
	return g
}

// TenantSkew describes how a trace's requests split into tenants.
type TenantSkew struct {
	Tenants int `json:"tenants"`
	// LargestShare is the largest tenant's share of block references; Top10Share the share
	// of the largest tenth of the tenants (at least one); Singletons the tenants of one
	// request; MedianRequests the median tenant's requests.
	LargestShare   float64 `json:"largest_share"`
	Top10Share     float64 `json:"top10_share"`
	Singletons     int     `json:"singletons"`
	MedianRequests int64   `json:"median_requests"`
}

// tenantSkew measures the split of t's requests by tenant.
func (t *Mooncake) tenantSkew() TenantSkew {
	n := len(t.salts)
	refs, reqs := make([]int64, n), make([]int64, n)
	var total int64
	for i, ti := range t.tenant {
		r := t.off[i+1] - t.off[i]
		refs[ti] += r
		reqs[ti]++
		total += r
	}
	sk := TenantSkew{Tenants: n}
	if n == 0 || total == 0 {
		return sk
	}
	slices.SortFunc(refs, func(a, b int64) int { return cmp.Compare(b, a) })
	var top int64
	for _, r := range refs[:max(1, n/10)] {
		top += r
	}
	sk.LargestShare, sk.Top10Share = float64(refs[0])/float64(total), float64(top)/float64(total)
	for _, r := range reqs {
		if r == 1 {
			sk.Singletons++
		}
	}
	slices.Sort(reqs)
	sk.MedianRequests = reqs[n/2]
	return sk
}
