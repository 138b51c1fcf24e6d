package placement

// Handle is a placement-handle index: 0..handles-1, or None. It is the one type for a
// placement decision from the policy through the engine to the device, which maps it to a
// placement identifier (an FDP PID, a write-stream id) with a bounds check of its own.
type Handle int32

// None is returned by Place when the write should carry no placement directive.
const None Handle = -1

// Write is what the engine knows about one write when it asks for a handle.
type Write struct {
	Namespace  string // key namespace (e.g. LMCache's fmt / "vllm")
	Model      string // model name
	KVRank     uint64 // LMCache kv_rank: ws<<24 | gr<<16 | lws<<8 | lr, unmasked (up to 2^63-1)
	CacheSalt  string // tenant or request-class salt ("" when none)
	Key        string // the full key, if the caller has it as text (optional)
	Identity   uint64 // 64-bit key identity (hash of the key); hotness is keyed by it
	ChunkIndex int    // position of the chunk in its token sequence; -1 if unknown
	Metadata   bool   // checkpoint / index metadata rather than KV payload
	Size       int    // payload bytes (the engine passes len(payload)); policies use it as a weight
}

// Policy picks a handle for a write.
type Policy interface {
	// Place returns a handle index in [0, handles) or None. It must be cheap and safe to
	// call from many goroutines; learning policies may update their statistics.
	Place(w Write) Handle
	// Name returns the canonical spec string Parse accepts for this policy.
	Name() string
}

// Event is an access the engine reports to learning policies.
type Event uint8

const (
	Lookup Event = iota // a lookup/contains hit on the key
	Load                // the key's payload was read
	Store               // the key was written (first time or rewritten after eviction)
	Delete              // the key was deleted or evicted
)

func (k Event) String() string {
	switch k {
	case Lookup:
		return "lookup"
	case Load:
		return "load"
	case Store:
		return "store"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Observer is implemented by policies that learn from the access stream (hotness). The
// engine calls Observe for every lookup, load, store and delete it serves; policies that
// do not implement it need nothing.
type Observer interface {
	Observe(identity uint64, ev Event)
}

// Observe forwards an event to p if p is an Observer (compositions forward to their parts).
func Observe(p Policy, identity uint64, ev Event) {
	if o, ok := p.(Observer); ok {
		o.Observe(identity, ev)
	}
}
