package workloads

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Mooncake request traces (docs/bench.md, "Mooncake traces"): JSONL, one request per line,
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]}
//
// timestamp in ms since the trace's start, input_length prompt tokens, hash_ids the prompt's
// prefix blocks of MooncakeBlockTokens tokens each (equal ids are the same block and, being
// prefix hashes, the same whole prefix up to it). A request becomes one KindRequest op whose
// Keys are the blocks' chunks in prompt order.

// MooncakeBlockTokens is the tokens of one Mooncake block (hash id).
const MooncakeBlockTokens = 512

// MaxTraceLine bounds one line of a trace file; a longer line is refused with its number.
// A variable so tests can pose as a long line without allocating one.
var MaxTraceLine = 64 << 20

// TraceStats describes a request trace as read, before any cache sees it.
type TraceStats struct {
	Requests       int64 `json:"requests"`
	BlockRefs      int64 `json:"block_refs"`      // hash ids over all requests
	DistinctBlocks int64 `json:"distinct_blocks"` // distinct hash ids
	// CeilingBlocks is the block references a cache of whole blocks that never evicts (and
	// stores every miss) hits: each request's leading run of blocks seen before.
	CeilingBlocks int64 `json:"ceiling_blocks"`
	Tokens        int64 `json:"tokens"`      // prompt tokens the blocks cover
	DurationMs    int64 `json:"duration_ms"` // last timestamp
	// The never-evicting cache of chunks (Mooncake.Chunked): chunk references, chunks and
	// tokens it hits. A block's chunks beyond a request's last token are not stored, so a
	// block that ends one prompt and recurs whole in a later one misses its tail: with
	// chunks smaller than a block the chunk ceiling can be below the block one.
	ChunkTokens   int   `json:"chunk_tokens,omitempty"`
	ChunkRefs     int64 `json:"chunk_refs,omitempty"`
	CeilingChunks int64 `json:"ceiling_chunks,omitempty"`
	CeilingTokens int64 `json:"ceiling_tokens,omitempty"`
	// LengthMismatch counts lines whose input_length does not fit their hash_ids (taken as
	// full blocks).
	LengthMismatch int64 `json:"length_mismatch,omitempty"`
	// FileRequests is the requests in the file when fewer are replayed (--requests): the
	// figures above are then those of the first Requests only.
	FileRequests int64 `json:"file_requests,omitempty"`
	// SaltBy is the tenant rule and Tenants how the requests split by it.
	SaltBy  string     `json:"salt_by,omitempty"`
	Tenants TenantSkew `json:"tenants,omitzero"`
}

// CeilingRatio is CeilingChunks over ChunkRefs (CeilingBlocks over BlockRefs before
// Chunked): the hit ratio no cache exceeds on this trace.
func (s TraceStats) CeilingRatio() float64 {
	if s.ChunkRefs > 0 {
		return float64(s.CeilingChunks) / float64(s.ChunkRefs)
	}
	if s.BlockRefs == 0 {
		return 0
	}
	return float64(s.CeilingBlocks) / float64(s.BlockRefs)
}

// Chunked returns the trace's stats with the never-evicting cache's figures for chunks of
// chunkTokens, worked out by replaying it into a set.
func (t *Mooncake) Chunked(chunkTokens int) TraceStats {
	s := t.Stats
	s.ChunkTokens = chunkTokens
	seen := map[Key]struct{}{}
	g := t.Replay(chunkTokens, 1, 1)
	var op Op
	for g.Next(&op) {
		lead := true
		for i, k := range op.Keys {
			_, hit := seen[k]
			if lead = lead && hit; lead {
				s.CeilingChunks++
				s.CeilingTokens += int64(min(chunkTokens, op.Tokens-i*chunkTokens))
			} else {
				seen[k] = struct{}{}
			}
		}
		s.ChunkRefs += int64(len(op.Keys))
	}
	return s
}

// Mooncake is a request trace held in memory once, compactly: the hash ids of all requests
// end to end, with offsets.
type Mooncake struct {
	Stats    TraceStats
	ids      []uint64
	off      []int64 // request i's ids are ids[off[i]:off[i+1]]
	tokens   []int32 // prompt tokens the blocks cover
	at       []int64 // ms
	mismatch []bool  // input_length did not fit the blocks
	tenant   []int32
	salts    []string
	saltBy   SaltBy
}

type mooncakeLine struct {
	Timestamp   *float64  `json:"timestamp"`
	InputLength *int64    `json:"input_length"`
	HashIDs     *[]uint64 `json:"hash_ids"`
}

// ErrTraceLine is wrapped by a trace line over MaxTraceLine.
var ErrTraceLine = errors.New("trace line too long")

// ReadMooncake reads a Mooncake trace from r line by line; saltBy derives each request's
// cache_salt. A malformed line is an error naming it (ErrTrace).
func ReadMooncake(r io.Reader, saltBy SaltBy) (*Mooncake, error) {
	t := &Mooncake{off: []int64{0}, saltBy: saltBy}
	br := bufio.NewReaderSize(r, 1<<16)
	var buf []byte
	for line := 1; ; line++ {
		b, err := readLine(br, &buf)
		if err == io.EOF && len(b) == 0 {
			break
		}
		if errors.Is(err, ErrTraceLine) {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes (%w)", ErrTrace, line, MaxTraceLine, ErrTraceLine)
		} else if err != nil && err != io.EOF {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var l mooncakeLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, line, err)
		}
		if err := t.add(&l); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, line, err)
		}
	}
	if len(t.at) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrTrace)
	}
	t.derive()
	return t, nil
}

// Window is the trace of t's first n requests (t itself when it has no more), its
// tenants derived and its figures worked out anew, as if the file held only those.
func (t *Mooncake) Window(n int64) *Mooncake {
	if n <= 0 || n >= int64(len(t.at)) {
		return t
	}
	w := &Mooncake{ids: t.ids[:t.off[n]], off: t.off[:n+1], tokens: t.tokens[:n], at: t.at[:n], mismatch: t.mismatch[:n], saltBy: t.saltBy}
	w.derive()
	w.Stats.FileRequests = int64(len(t.at))
	return w
}

// derive gives the requests their tenants and works out the trace's figures. The ceiling
// counts a block as seen per tenant: a salt is part of a chunk's identity.
func (t *Mooncake) derive() {
	t.tenant, t.salts = t.saltBy.salts(t)
	s := TraceStats{SaltBy: t.saltBy.String()}
	seen := map[Key]struct{}{}
	distinct := map[uint64]struct{}{}
	for i := range t.at {
		ids := t.ids[t.off[i]:t.off[i+1]]
		lead := true
		for _, id := range ids {
			k := Key{Hash: id, Tenant: t.tenant[i]}
			_, hit := seen[k]
			if lead = lead && hit; lead {
				s.CeilingBlocks++
			}
			seen[k] = struct{}{}
			distinct[id] = struct{}{}
		}
		if t.mismatch[i] {
			s.LengthMismatch++
		}
		s.Requests++
		s.BlockRefs += int64(len(ids))
		s.Tokens += int64(t.tokens[i])
		s.DurationMs = max(s.DurationMs, t.at[i])
	}
	s.DistinctBlocks = int64(len(distinct))
	s.Tenants = t.tenantSkew()
	t.Stats = s
}

// readLine returns the next line without its newline, at most MaxTraceLine bytes, reusing *buf.
func readLine(br *bufio.Reader, buf *[]byte) ([]byte, error) {
	*buf = (*buf)[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(*buf)+len(frag) > MaxTraceLine+1 {
			return nil, ErrTraceLine
		}
		*buf = append(*buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(*buf, "\r\n"), err
	}
}

func (t *Mooncake) add(l *mooncakeLine) error {
	switch {
	case l.Timestamp == nil || l.InputLength == nil || l.HashIDs == nil:
		return errors.New("want timestamp, input_length and hash_ids")
	case *l.Timestamp < 0 || *l.Timestamp > 1e15 || *l.Timestamp != *l.Timestamp:
		return fmt.Errorf("timestamp %v is not a time in ms", *l.Timestamp)
	case len(*l.HashIDs) == 0:
		return errors.New("hash_ids is empty")
	case *l.InputLength <= 0:
		return fmt.Errorf("input_length %d is not positive", *l.InputLength)
	case len(*l.HashIDs) > 1<<22:
		return fmt.Errorf("%d hash_ids is more than a prompt holds", len(*l.HashIDs))
	}
	ids := *l.HashIDs
	n := int64(len(ids))
	tokens := *l.InputLength
	mismatch := tokens <= (n-1)*MooncakeBlockTokens || tokens > n*MooncakeBlockTokens
	if mismatch {
		tokens = n * MooncakeBlockTokens
	}
	t.ids = append(t.ids, ids...)
	t.off = append(t.off, int64(len(t.ids)))
	t.tokens = append(t.tokens, int32(tokens))
	t.at = append(t.at, int64(*l.Timestamp))
	t.mismatch = append(t.mismatch, mismatch)
	return nil
}

// Salts are the cache_salts the requests got.
func (t *Mooncake) Salts() []string { return t.salts }

// ChunkKey is the key of chunk j (of chunkTokens) of block id: one key per (block, chunk),
// the same wherever the block recurs.
func ChunkKey(id uint64, j int) uint64 { return mix(mix(id) ^ uint64(j)) }

// CheckChunkTokens refuses a chunk size that does not divide a Mooncake block.
func CheckChunkTokens(chunkTokens int) error {
	if chunkTokens <= 0 || MooncakeBlockTokens%chunkTokens != 0 {
		return fmt.Errorf("%w: chunks of %d tokens do not divide a %d-token trace block (512, 256, 128, ... do)", ErrSpec, chunkTokens, MooncakeBlockTokens)
	}
	return nil
}

// Replay returns a generator of the trace's requests with chunkTokens-token chunks of
// chunkBytes each; loops > 1 replays it that many times (later passes arrive after the last
// request of the one before).
func (t *Mooncake) Replay(chunkTokens, chunkBytes, loops int) Generator {
	return &mooncakeGen{t: t, per: MooncakeBlockTokens / chunkTokens, ct: chunkTokens, size: chunkBytes, loops: max(loops, 1)}
}

type mooncakeGen struct {
	t              *Mooncake
	per, ct, size  int
	i, pass, loops int
	keys           []Key
}

func (g *mooncakeGen) Salts() []string { return g.t.salts }
func (g *mooncakeGen) ChunkBytes() int { return g.size }

func (g *mooncakeGen) Next(op *Op) bool {
	t := g.t
	if g.i == len(t.at) {
		g.i, g.pass = 0, g.pass+1
	}
	if g.pass >= g.loops {
		return false
	}
	i := g.i
	g.i++
	ti := t.tenant[i]
	tokens := int(t.tokens[i])
	nChunks := (tokens + g.ct - 1) / g.ct
	g.keys = g.keys[:0]
	for b, id := range t.ids[t.off[i]:t.off[i+1]] {
		for j := 0; j < g.per && b*g.per+j < nChunks; j++ {
			g.keys = append(g.keys, Key{Hash: ChunkKey(id, j), Tenant: ti})
		}
	}
	at := time.Duration(t.at[i]+int64(g.pass)*(t.Stats.DurationMs+1)) * time.Millisecond
	*op = Op{Kind: KindRequest, Tenant: ti, Keys: g.keys, Size: g.size, Tokens: tokens, ChunkTokens: g.ct, BlockChunks: g.per, At: at}
	return true
}
