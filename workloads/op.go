package workloads

import (
	"fmt"
	"time"
)

// Kind is what an Op asks for.
type Kind uint8

const (
	// KindRequest is one LLM request: look up the longest cached prefix of Keys, load it,
	// store the rest (unless ReadOnly).
	KindRequest Kind = iota
	// KindPut stores Keys that are not cached yet.
	KindPut
	// KindGet looks up, locks, loads and unlocks Keys (hits only).
	KindGet
	// KindDelete removes Keys from the cache.
	KindDelete
	numKinds
)

var kindNames = [...]string{"request", "put", "get", "delete"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown op %q (want request, put, get or delete)", s)
}

// Key names one cached chunk: its chunk hash and the tenant (cache_salt) it belongs to.
// Tenant indexes Workload.Salts.
type Key struct {
	Hash   uint64
	Tenant int32
}

// Op is one operation of a workload stream. Keys is only valid until the next call to the
// generator's Next; copy it to keep it.
type Op struct {
	Kind     Kind
	Tenant   int32 // index into Salts; every key of an op belongs to it
	Keys     []Key // a request's chunk chain in prompt order; otherwise the keys to act on
	Size     int   // payload bytes per chunk
	ReadOnly bool  // requests only: look up and load, store nothing
	Pos      int   // requests: index in the whole conversation of Keys[0] (0 = start of prompt)

	// Trace requests (mooncake.go) also say what their chunks hold, for token and block
	// hit ratios; zero otherwise.
	Tokens      int           // prompt tokens Keys cover: chunk i holds min(ChunkTokens, Tokens − i·ChunkTokens)
	ChunkTokens int           // tokens per full chunk
	BlockChunks int           // chunks per trace block
	At          time.Duration // arrival since the trace's start (DriverConfig.Speed replays it)
	// NodeOp marks a cache node's client call (l2trace replays): the admission policy sees
	// a get as a lookup and decides whether a put is stored, as a node's policy does.
	NodeOp bool
}

// Generator emits a workload. Next fills op and reports false at the end of the stream.
type Generator interface {
	Next(op *Op) bool
	// Salts names the tenants (cache_salt values); Op.Tenant indexes it. "" means no salt.
	Salts() []string
	// ChunkBytes is the largest payload any op stores.
	ChunkBytes() int
}

// Identity is the key's 64-bit identity as the simulated engine gives it to placement
// policies (the real engine derives its own from the encoded key).
func (k Key) Identity() uint64 { return mix(k.Hash ^ uint64(k.Tenant)<<56) }
