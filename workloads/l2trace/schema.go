// Package l2trace records what a cache node serves — every get, set, exists, delete and
// peer fetch, with its time, client, tenant, model, kv rank, chunk, size, outcome and
// latency — as versioned JSON lines, and reads such recordings back for replay
// (workloads: --workload l2trace:FILE). No payload byte is recorded. The format is
// docs/record.md's; FormatVersion names it.
//
// A node records through a Recorder (recorder.go): Record never blocks the caller; a full
// buffer drops the record and counts it. Files are size-bounded and rotate.
package l2trace

import (
	"errors"
	"time"
)

// Part of the recording format (docs/record.md): do not change without a new version.
const (
	// Schema names the format in every header line.
	Schema = "rbctl-l2trace"
	// FormatVersion is the schema version this package writes and reads.
	FormatVersion = 1
)

// Op is what a record's client asked for.
type Op string

// The operations a node serves (docs/record.md, "op").
const (
	OpGet    Op = "get"    // a client read a chunk (RESP GET/MGET, gRPC Get); hit or miss
	OpSet    Op = "set"    // a client stored a chunk (RESP SET/MSET, gRPC Put); stored or refused
	OpExists Op = "exists" // a client asked whether the node holds a chunk (no load)
	OpDelete Op = "delete" // a client deleted a chunk; hit: the node held it
	OpFetch  Op = "fetch"  // a peer node read a chunk this node holds (p2p data plane)
)

// Valid reports whether o is one of the operations above.
func (o Op) Valid() bool {
	switch o {
	case OpGet, OpSet, OpExists, OpDelete, OpFetch:
		return true
	}
	return false
}

// Capacity is the recording node's cache: what a replay without size flags uses.
type Capacity struct {
	Slots     int64 `json:"slots"`      // chunks the node can hold
	SlotBytes int64 `json:"slot_bytes"` // bytes of one slot (header + payload, rounded to the block)
}

// Header is the first line of every recording file.
type Header struct {
	Kind          string   `json:"kind"` // "header"
	Schema        string   `json:"schema"`
	FormatVersion int      `json:"format_version"`
	Node          string   `json:"node,omitempty"`         // the node's name (several merged recordings: one per node)
	StartUnixUs   int64    `json:"start_unix_us"`          // when the recording (not this file) began
	Part          int      `json:"part"`                   // 0 for the first file, n for the n-th rotation
	Capacity      Capacity `json:"capacity"`               // the node's cache
	Eviction      string   `json:"eviction"`               // lru, fifo, region or none
	Admission     string   `json:"admission"`              // the node's admission policy (all, second-hit[:W], tinylfu[:W])
	Redacted      string   `json:"redacted,omitempty"`     // how tenants, models and clients were hashed ("" = not)
	Software      string   `json:"software,omitempty"`     // the recording program and version
	ChunkTokens   int      `json:"chunk_tokens,omitempty"` // tokens per chunk when the node knows it
}

// Record is one served operation of one chunk. A batch (MGET, a gRPC GetMany) is one record
// per chunk with the same Batch.
type Record struct {
	Time    time.Time     // when the node received the operation
	Op      Op            //
	Client  string        // the client's address (or its hash)
	Proto   string        // resp, grpc or peer
	Salt    string        // cache_salt, the tenant ("" = none)
	Model   string        // model name of the chunk's key
	KVRank  int           // kv rank of the chunk's key
	Chunk   string        // chunk hash as the key spells it (hex, as LMCache's keys)
	Size    int64         // payload bytes: stored (set), returned (get/fetch hit), 0 otherwise
	Hit     bool          // get, exists, fetch: the node held it; delete: it was there; set: stored
	Latency time.Duration // from receipt to reply
	Batch   uint64        // the call's sequence number when it carried several chunks (0 = one)
	Err     string        // the operation failed (not a miss): what went wrong
}

// Footer closes every file the Recorder finished (rotation or Close).
type Footer struct {
	Kind    string `json:"kind"` // "footer"
	Records int64  `json:"records"`
	// Dropped is the records lost to a full buffer (or a failed write) since the previous
	// file ended: the recording misses that many operations here.
	Dropped int64 `json:"dropped"`
}

// Errors of reading a recording; every one wraps ErrRecording.
var (
	ErrRecording = errors.New("l2trace recording")
	ErrHeader    = errors.New("not an l2trace header")
	ErrVersion   = errors.New("unsupported l2trace format version")
)
