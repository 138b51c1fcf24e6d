// Package engine is rbctl's raw-block KV-cache engine: an on-disk compatible Go
// reimplementation of LMCache's raw-block backend (RawBlockCore), with a compact index,
// O(1) slot allocation, a checkpoint that never holds the index lock for a full
// serialisation and is never silently skipped, payload checksums, placement hooks for NVMe
// FDP, and an asynchronous task API. The on-disk format is documented in docs/format.md.
//
// This file is the exported surface other packages code against; keep it stable (additive
// changes only).
package engine

import (
	"errors"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Namespace selects how keys map to the 64-bit slot identity stored in slot headers.
type Namespace string

const (
	// NamespaceObject: identity = BLAKE2b-64 (little-endian) of the encoded key (LMCache MP mode).
	NamespaceObject Namespace = "object"
	// NamespaceLegacy: identity = chunk hash masked to 64 bits (LMCache's non-MP plugin).
	NamespaceLegacy Namespace = "legacy"
)

// CheckpointFormat selects the encoding of the metadata container payload.
type CheckpointFormat string

const (
	// CheckpointLMCacheV1 is LMCache's v1 JSON state, byte for byte what LMCache writes.
	CheckpointLMCacheV1 CheckpointFormat = "lmcache-v1"
	// CheckpointCompact is rbctl's compact binary checkpoint (docs/format.md). Readers of
	// both formats are always available; this only chooses what is written.
	CheckpointCompact CheckpointFormat = "compact"
)

// Config is the engine configuration. Field names follow LMCache's raw_block keys; see
// DefaultConfig for LMCache's defaults (MP adapter).
type Config struct {
	DevicePath string // recorded in the v1 checkpoint ("device_path"); checked on load when both are set

	BlockAlign     int    // block_align, power of two (default 4096)
	HeaderBytes    int    // header_bytes, multiple of BlockAlign, >= 24 (default 4096)
	SlotBytes      int64  // slot_bytes, multiple of BlockAlign, >= HeaderBytes+1
	MetaTotalBytes int64  // meta_total_bytes, multiple of BlockAlign (default 256 MiB)
	CapacityBytes  int64  // capacity_bytes, 0 = whole device
	MetaMagic      string // meta_magic, 8 bytes (default "LMCIDX01")
	MetaVersion    uint32 // meta_version (default 1)

	// Checkpoint cadence. The periodic thread wakes every CheckpointInterval (LMCache's
	// max(1s, meta_checkpoint_interval_sec)) and writes when dirty and idle for IdleQuiet.
	// Beyond LMCache (C5), it also writes when dirty and ForceAfterOps dirty operations or
	// ForceAfter time have accumulated since the last checkpoint, idle or not: the crash
	// window is bounded by min(ForceAfterOps ops, ForceAfter + CheckpointInterval).
	Periodic           bool          // meta_enable_periodic (default true)
	CheckpointInterval time.Duration // default 60 s
	IdleQuiet          time.Duration // default 100 ms
	ForceAfterOps      int64         // default 65536; 0 disables
	ForceAfter         time.Duration // default 5 min; 0 disables
	FinalCheckpoint    bool          // Close writes a final forced checkpoint (default true)

	VerifyOnLoad    bool // meta_verify_on_load: read every slot header at Open (default true)
	RecoveryReaders int  // parallel header readers at Open (default 8)
	LoadCheckpoint  bool // load_checkpoint_on_init (default true); false starts empty

	Namespace        Namespace        // default object
	CheckpointFormat CheckpointFormat // default compact
	// PayloadChecksum stores a CRC-32C of the payload in slot-header bytes 24..32 (with a
	// marker), verified on load and at recovery with VerifyOnLoad. LMCache v1 readers only
	// check magic, identity and length, so they still accept such slots. Default true.
	PayloadChecksum bool
	// VerifyPayloadOnRecover additionally reads every payload at Open and checks its CRC
	// (slow; rbctl recover --verify). Default false.
	VerifyPayloadOnRecover bool

	StoreWorkers  int // async store pool (default 2)
	LookupWorkers int // async lookup pool (default 1)
	LoadWorkers   int // async load pool (default 4)
	QueueDepth    int // max ops per device Submit batch from one call (default 256)

	// BufferPoolBytes sizes the engine's staging-buffer arena, allocated once at
	// Format/Open with blockdev.Alloc and registered with the device when it implements
	// blockdev.BufferRegistrar (io_uring fixed buffers, NVMe passthrough fixed commands).
	// Rounded down to whole slots; 0 means min(QueueDepth × SlotBytes, 256 MiB); at most
	// 1 GiB (one io_uring registered buffer); negative disables the arena (a buffer is
	// allocated per call, never registered).
	BufferPoolBytes int64
	// NoRegisterBuffers keeps the arena but does not register it with the device (plain
	// reads/writes instead of fixed ones; for comparisons).
	NoRegisterBuffers bool

	// ReadOnly opens without ever writing to the device: no checkpoints, puts and deletes
	// fail with ErrReadOnly. Used by inspect and recover --dry-run.
	ReadOnly bool

	// Placement. The engine describes every write to Placer as one placement.Write (key
	// namespace, model, kv rank, cache salt, identity, size, metadata or not) and sends the
	// handle it returns with the write, after checking it against the device's handles
	// (ErrBadHandle). A Placer that is also a placement.Observer is told of every lookup
	// hit, load, store and delete.
	Placer         placement.Policy // nil: no directive (placement.None) for every write
	MetadataHandle placement.Handle // handle for checkpoint writes (default None: ask Placer)
	SlotAffinity   bool             // reuse a free slot last written with the same handle (LMCache pid_affinity)
	// DeallocateOnDelete hands freed slots to a background deallocator that gives them to
	// Device.Deallocate in batches (adjacent slots merged) off the store and delete paths;
	// a freed slot is reused only after its deallocate returned. Checkpoints and Close
	// drain the queue.
	DeallocateOnDelete bool
	DeallocateBatch    int // pending slots that wake the deallocator (default 64)
	// DeallocateAge deallocates a freed slot no put has reused for a whole period of it
	// (default 50 ms; 0: only batches, checkpoints and Close issue deallocates).
	DeallocateAge time.Duration
	// DeallocateInline has the call that frees the DeallocateBatch-th pending slot issue
	// the batch itself before it returns, with no background goroutine and no age tick, so
	// that deallocates reach the device at the same point of the operation stream in every
	// run (a benchmark's WAF with one worker is then reproducible to the byte). It puts
	// the deallocate on the delete path.
	DeallocateInline bool
	// SlotGroupBytes groups consecutive slots (rounded down to whole slots, >= 1 slot) into
	// reclaim-unit-sized groups; a group is owned by one handle at a time and each handle
	// allocates from its own groups. When a handle has no free slot in its groups and no
	// unowned group is left, it falls back to a free slot of another handle's group (counted
	// in Stats.GroupFallbacks). 0 disables grouping (LMCache behaviour: global LIFO).
	SlotGroupBytes int64

	// Progress, when set, is called during recovery with entries verified so far and total.
	Progress func(done, total int)
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Key is an encoded cache key and its 64-bit slot identity.
type Key struct {
	enc string
	id  uint64
	ns  Namespace
}

// PutResult is PutMany's outcome: Results[i] for keys[i] (true also for an already-indexed
// key), Stored the indexes of keys actually written by this call.
type PutResult struct {
	Results []bool
	Stored  []int
}

// EntryMeta is what the index holds for a key.
type EntryMeta struct {
	Offset          int64            // slot offset on the device
	Size            int              // payload bytes
	Slot            uint32           // slot number
	Handle          placement.Handle // placement handle the slot was written with
	Checksum        uint32           // CRC-32C of the payload (0 when unknown)
	HasChecksum     bool
	Locks           uint32 // lock reference count
	Shape           []int  // optional tensor metadata carried in the v1 checkpoint
	Dtype           string
	Fmt             string
	CachedPositions []int
}

// ObjMeta is optional tensor metadata stored with a key (v1 checkpoint fields).
type ObjMeta struct {
	Shape           []int
	Dtype           string
	Fmt             string
	CachedPositions []int
}

// Usage reports slot occupancy.
type Usage struct {
	SlotsTotal    int64
	SlotsUsed     int64 // indexed entries
	SlotsInflight int64
	SlotsFree     int64 // on free lists, including SlotsPending
	SlotsPending  int64 // freed, waiting for a batched Deallocate before reuse
	NextSlot      int64 // slots never used yet: [NextSlot, SlotsTotal)
	Fraction      float64
	BytesBySalt   map[string]int64 // slot_bytes per entry, by cache_salt ("" = none)
	SlotsByHandle map[placement.Handle]int64
}

// Stats are cumulative counters since Open/Format.
type Stats struct {
	Puts, PutBytes, PutSkipped, PutFailed int64
	Loads, LoadBytes, LoadMisses          int64
	ChecksumErrors                        int64
	Deletes, DeletesRefused               int64
	Lookups, LookupHits                   int64

	Checkpoints        int64 // written successfully
	CheckpointsForced  int64 // written because of ForceAfterOps/ForceAfter, not idleness
	CheckpointErrors   int64 // failures, including a checkpoint too large for its container
	CheckpointBytes    int64 // payload bytes of the last checkpoint
	CheckpointEntries  int64 // entries in the last checkpoint
	CheckpointSeq      uint64
	MaxLockHold        time.Duration // longest index-lock hold taken by a checkpoint snapshot (wall clock)
	MaxLockHoldCPU     time.Duration // the same hold measured in on-CPU time of the holding thread
	LastCheckpointTime time.Duration // duration of the last checkpoint (snapshot+encode+write+flush)
	DirtyOps           int64         // mutations not yet in a checkpoint

	AffinityHits, AffinityFallbacks int64
	GroupFallbacks                  int64
	// DeallocateOnDelete (docs/engine.md "Deallocation"): slots whose Deallocate succeeded,
	// failed Deallocate calls (their slots were freed anyway), Deallocate calls made,
	// ranges they carried after merging adjacent slots, and freed slots reused by a put
	// before their deallocate was issued (the overwrite made it unnecessary).
	DeallocatedSlots    int64
	DeallocateErrors    int64
	DeallocateCalls     int64
	DeallocateRanges    int64
	LastCheckpointError string // "" when the last checkpoint attempt succeeded
	// CheckpointFailingFor is how long the oldest change not in a checkpoint has waited
	// while the last attempt failed (0 while checkpoints succeed); once past the crash
	// window puts are refused (ErrCheckpointFailing, counted in PutsRefusedCheckpoint).
	CheckpointFailingFor  time.Duration
	PutsRefusedCheckpoint int64
	// Room is the checkpoint room accounting (ErrIndexFull refusals in Room.Refused).
	Room RoomStats

	// Staging buffers (Config.BufferPoolBytes).
	BufferPoolBytes      int64  // arena size (0: no arena)
	BuffersRegistered    bool   // the arena is registered with the device (fixed I/O)
	BufferRegisterErrors int64  // failed arena allocations or registrations (the engine ran on)
	BufferRegisterError  string // the last such error ("" when none)
	BufferPoolMisses     int64  // staging buffers allocated per call because the arena was empty
	RegisteredMemory     int64  // bytes of caller buffers registered by RegisterMemory
	// PutsVectored are stored puts written without a copy: the header from a staging buffer
	// and the payload from the caller's memory in one vectored write (docs/engine.md
	// "Zero-copy puts"); the other puts copied their payload behind the header.
	PutsVectored int64

	Recovery RecoveryReport
}

// RecoveryReport says what Open found.
type RecoveryReport struct {
	Container  int    // container index used (-1: none valid, started empty)
	Seq        uint64 // its sequence number
	Format     CheckpointFormat
	Loaded     int // entries in the checkpoint
	Kept       int
	Dropped    []DroppedEntry
	Verified   bool
	Duration   time.Duration
	FreeSlots  int64
	NextSlot   int64
	Containers [2]ContainerInfo
	Selection  Selection // which container was used and why (select.go)
	// Scan is set when no checkpoint was usable and the index was rebuilt from the slot
	// headers (OpenOptions.Scan); Container is then -1.
	Scan *ScanReport
	// Rescued are the keys a fallback (Selection.Fallback, Lost > 0) took back from the
	// rejected container's index because their slots still hold them, verified as every
	// entry is (VerifyOnLoad: identity, length and checksum in the slot header; the payload
	// too with VerifyPayloadOnRecover); NotRescued are the lost entries that could not be,
	// with why (they are not in Dropped, which is about the chosen checkpoint's entries).
	Rescued    []string
	NotRescued []DroppedEntry
}

// DroppedEntry is an entry recovery refused, with the reason.
type DroppedEntry struct {
	Key    string
	Slot   int64
	Reason string
}

// ContainerInfo describes one metadata container as found on the device.
type ContainerInfo struct {
	Index       int
	Offset      int64
	Magic       string
	Version     uint32
	Seq         uint64
	PayloadLen  uint64
	CRC         uint32
	ComputedCRC uint32
	Valid       bool
	Problem     string // why it is not valid ("" when valid, "empty" when never written)
	Format      CheckpointFormat
}

// TaskID identifies an async task.
type TaskID uint64

// TaskKind is the kind of an async task.
type TaskKind uint8

const (
	TaskStore  TaskKind = iota + 1 // PutMany
	TaskLookup                     // ExistsMany with lock=true
	TaskLoad                       // LoadManyInto
)

// TaskResult is a completed async task.
type TaskResult struct {
	ID      TaskID
	Kind    TaskKind
	Results []bool // per key (store: PutResult.Results, lookup: hit bitmap, load: loaded)
	Stored  []int  // store only
	Err     error
}

// Sentinel errors; match with errors.Is.
//
// ErrCorrupt marks damaged bytes: every error a decoder returns for what it read from the
// device (a checkpoint container, a checkpoint payload, a slot header) satisfies
// errors.Is(err, ErrCorrupt), and the specific sentinels below it (ErrBadMagic,
// ErrBadVersion, ErrChecksum, ErrTruncated) match as well. A checkpoint whose layout
// differs from the config (ErrLayoutMismatch), a device never formatted (ErrNoCheckpoint
// alone) and a bad key given by a caller (ErrKeyFormat) are not corruption. Open wraps
// ErrCorrupt as well as ErrNoCheckpoint when no container is readable because the
// containers are damaged rather than empty.
var (
	ErrCorrupt    = errors.New("corrupt metadata")
	ErrBadMagic   = corruption("bad magic")
	ErrBadVersion = corruption("unsupported version") // a version this reader does not know: damage or another format
	ErrChecksum   = corruption("checksum mismatch")
	ErrTruncated  = corruption("truncated record")

	ErrConfig           = errors.New("invalid engine config")
	ErrLayoutMismatch   = errors.New("checkpoint layout does not match the config")
	ErrNoCheckpoint     = errors.New("no valid checkpoint")
	ErrCheckpointTooBig = errors.New("checkpoint does not fit its metadata container")
	ErrClosed           = errors.New("engine closed")
	ErrReadOnly         = errors.New("engine opened read-only")
	ErrKeyFormat        = errors.New("key cannot be parsed")
	ErrDeviceTooSmall   = errors.New("device too small for the layout")
	ErrBadHandle        = errors.New("placement handle outside the device's handles")
	// ErrIndexFull refuses a put before anything is written: the key's index entry could
	// not be held by the next checkpoint without taking room kept for the free slots
	// (docs/engine.md, "Room in the checkpoint"). The key's bytes, its metadata or a new
	// model prefix or cache_salt are too long for what meta_total_bytes has left.
	ErrIndexFull = errors.New("index entry would not fit the checkpoint")
	// ErrCheckpointFailing refuses a put while checkpoints have been failing for longer
	// than the crash window (CheckpointInterval + ForceAfter): a write acknowledged now
	// could be lost by a crash beyond what the window promises. Puts resume once a
	// checkpoint succeeds; Stats.LastCheckpointError says why they fail.
	ErrCheckpointFailing = errors.New("checkpoints are failing; writes refused")
)

// corruptionError is a specific kind of corruption: it is itself and ErrCorrupt.
type corruptionError struct{ msg string }

func corruption(msg string) error { return &corruptionError{msg} }

func (e *corruptionError) Error() string        { return e.msg }
func (e *corruptionError) Is(target error) bool { return target == ErrCorrupt }

// DefaultConfig returns LMCache's MP-adapter defaults plus rbctl's additions. SlotBytes is
// required by LMCache; the default here is 1 MiB (a 4 KiB header plus 1020 KiB of payload).
func DefaultConfig() Config { return defaultConfig() }

// Validate checks the config; each error names the field and the fix.
func (c Config) Validate() error { return c.validate() }

// ComputeLayout derives the on-disk geometry for a device of devSize bytes.
func ComputeLayout(c Config, devSize int64) (Layout, error) { return computeLayout(c, devSize) }

// Format writes a fresh, empty cache (both containers: an empty checkpoint with seq 1 in
// container 0, container 1 zeroed) and returns an open engine.
func Format(dev blockdev.Device, cfg Config) (*Engine, error) { return format(dev, cfg) }

// Open recovers the cache on dev: picks the newest valid checkpoint (select.go: seqs are
// trusted only under a checksum; RecoveryReport.Selection says which and why; a writable
// Open refuses a choice in doubt, see OpenWith), rejects a layout mismatch, rebuilds free slots, verifies slot headers in parallel when
// cfg.VerifyOnLoad, and starts the checkpoint thread and worker pools.
func Open(dev blockdev.Device, cfg Config) (*Engine, error) { return open(dev, cfg) }

// ReadLayout computes the layout of dev under cfg without touching the device's contents.
func ReadLayout(dev blockdev.Device, cfg Config) (Layout, error) {
	return computeLayout(cfg, dev.Info().Size)
}

// ReadContainers reads both metadata container headers and checks their CRCs (read-only).
func ReadContainers(dev blockdev.Device, cfg Config) ([2]ContainerInfo, error) {
	return readContainers(dev, cfg)
}

// DetectConfig infers block_align, meta_total_bytes, header_bytes, slot_bytes, magic,
// version, namespace and checkpoint format from a formatted device (read-only). Fields it
// cannot infer keep DefaultConfig values; the error says when no container was found.
func DetectConfig(dev blockdev.Device) (Config, error) { return detectConfig(dev) }

// PutMany stores payloads under keys (LMCache put_many semantics): an already indexed key
// is true and not rewritten; an in-flight key is false; no free slot is false; a payload
// larger than slot_bytes-header_bytes is false. Device errors fail only the keys involved.
// A payload whose length is a multiple of block_align (and, on an O_DIRECT device, whose
// memory starts on a block_align boundary, as blockdev.Alloc's does) is written from the
// caller's memory without a copy: payloads must not change until PutMany returns.
func (e *Engine) PutMany(keys []Key, payloads [][]byte) (PutResult, error) {
	return e.putMany(keys, payloads, PutOptions{})
}

// PutManyMeta is PutMany with per-key tensor metadata (metas may be nil or hold nils).
func (e *Engine) PutManyMeta(keys []Key, payloads [][]byte, metas []*ObjMeta) (PutResult, error) {
	return e.putMany(keys, payloads, PutOptions{Metas: metas})
}

// PutOptions are what one PutManyWith call says of its writes.
type PutOptions struct {
	Metas []*ObjMeta // per-key tensor metadata (nil, or nils: none)
	// Placed writes every key with Handle instead of asking Config.Placer (a node's replicas
	// of chunks fetched from a peer, written with their own handle); the handle is checked
	// against the device's as the policy's would be. The policy still observes the stores.
	Placed bool
	Handle placement.Handle
}

// PutManyWith is PutMany with the call's options.
func (e *Engine) PutManyWith(keys []Key, payloads [][]byte, o PutOptions) (PutResult, error) {
	return e.putMany(keys, payloads, o)
}

// LoadManyInto reads each key's payload into bufs[i] (len(bufs[i]) must be >= the size; the
// first Size bytes are written). With PayloadChecksum the CRC is checked and a mismatch is a
// false result (and Stats.ChecksumErrors). The returned error is the first device error.
func (e *Engine) LoadManyInto(keys []Key, bufs [][]byte) ([]bool, error) {
	return e.loadManyInto(keys, bufs, LoadOptions{})
}

// LoadOptions are what one LoadManyIntoWith call says of its reads.
type LoadOptions struct {
	// Unchecked returns a payload whose CRC-32C the engine knows (EntryMeta.HasChecksum)
	// without comparing it: for a caller that passes the bytes on together with the stored
	// CRC (EntryMeta.Checksum) to a receiver that checks them end to end, as a peer fetch
	// does, so that the bytes are summed once, by the receiver, instead of twice. A corrupt
	// payload is then found by the receiver, not here (no Stats.ChecksumErrors). Entries
	// without a known CRC are checked as always.
	Unchecked bool
}

// LoadManyIntoWith is LoadManyInto with the call's options.
func (e *Engine) LoadManyIntoWith(keys []Key, bufs [][]byte, o LoadOptions) ([]bool, error) {
	return e.loadManyInto(keys, bufs, o)
}

// ExistsMany returns the hit bitmap; with lock each hit's lock count is incremented.
func (e *Engine) ExistsMany(keys []Key, lock bool) []bool { return e.existsMany(keys, lock) }

// MetadataPrefix returns the metadata of the leading hits (stops at the first miss),
// locking each when lock is set.
func (e *Engine) MetadataPrefix(keys []Key, lock bool) []EntryMeta {
	return e.metadataPrefix(keys, lock)
}

// LoadMany loads every key present into a buffer of its payload's size from alloc (nil:
// make), pinned while it is read so that it cannot be deleted or replaced meanwhile; out[i]
// is nil for a miss or a read that failed its checks. One call, two holds of the index lock,
// for what MetadataPrefix(keys, true) + LoadManyInto + UnlockMany did (a remote get, a RESP
// GET). alloc may return a longer buffer (aligned, say); out[i] is cut to the payload.
func (e *Engine) LoadMany(keys []Key, alloc func(size int) []byte) ([][]byte, error) {
	return e.loadMany(keys, alloc)
}

// UnlockMany decrements lock counts (floor 0); missing keys are ignored.
func (e *Engine) UnlockMany(keys []Key) { e.unlockMany(keys) }

// DeleteMany removes keys: a locked entry is kept (false) unless force; an in-flight key is
// cancelled (true) and its slot returns to the free list when its write ends; a missing key
// is false; otherwise the slot is freed (true).
func (e *Engine) DeleteMany(keys []Key, force bool) []bool { return e.deleteMany(keys, force) }

// Lookup returns one key's metadata.
func (e *Engine) Lookup(k Key) (EntryMeta, bool) { return e.lookup(k) }

// Usage reports slot occupancy.
func (e *Engine) Usage() Usage { return e.usage() }

// Stats returns the counters.
func (e *Engine) Stats() Stats { return e.stats() }

// Layout returns the engine's geometry.
func (e *Engine) Layout() Layout { return e.layout }

// Config returns the effective config.
func (e *Engine) Config() Config { return e.cfg }

// Device returns the device the engine writes through.
func (e *Engine) Device() blockdev.Device { return e.dev }

// CheckpointNow writes a checkpoint now if anything changed since the last one (LMCache:
// force bypasses idleness, not dirtiness). An error is returned and counted, never skipped.
func (e *Engine) CheckpointNow() error { return e.checkpoint(true, false) }

// RegisterMemory registers the caller's long-lived buffers with the device (io_uring fixed
// buffers), next to the engine's staging arena, so loads into them — aligned buffers are
// read into directly — go out as READ_FIXED: the kernel then pins no pages per read. A
// later call replaces the set; RegisterMemory(nil) drops it. Each buffer must come from
// blockdev.Alloc (or other memory that is never unmapped or moved) and stay allocated until
// the engine is closed or the set is replaced. The io_uring file/block device and the NVMe
// passthrough device (its io_uring transport; the ioctl transport ignores the call) take
// registered buffers; other devices (memory, the posix file backend) return an error
// wrapping blockdev.ErrNotSupported. Loads into unregistered memory still work.
func (e *Engine) RegisterMemory(bufs [][]byte) error { return e.registerMemory(bufs) }

// FlushDeallocates issues the deallocates of every slot freed so far (DeallocateOnDelete)
// and waits until they have returned; failures are counted in Stats.DeallocateErrors.
func (e *Engine) FlushDeallocates() { e.drainDeallocs() }

// Entries calls fn for each indexed entry until fn returns false, in slot order. It reads
// the index a chunk of slots at a time and never holds the index lock while fn runs (fn may
// call the engine): an entry indexed for the whole walk is visited exactly once; one stored
// or deleted during the walk may or may not be (a key deleted and stored again in a later
// slot can be visited twice). On a quiescent engine it is every entry once.
func (e *Engine) Entries(fn func(Key, EntryMeta) bool) { e.entries(fn) }

// Identities calls fn with the identity (Key.Identity) of each indexed entry, as Entries
// walks them, until fn returns false; no key is spelled, so it costs a fraction of Entries.
func (e *Engine) Identities(fn func(uint64) bool) { e.identities(fn) }

// InStoreOrder walks the indexed entries in the order they were stored, the least recent
// first (the most recent first with newestFirst), calling fn with each one's identity and,
// when spell is set, its key (a zero Key otherwise), until fn returns false. Recovery keeps
// the store order (the checkpoint lists entries in it), so after a restart it is the order
// the entries were stored in before: an eviction order is seeded from it. Like Entries it
// never holds the index lock while fn runs; an entry stored or deleted during the walk may
// or may not be visited.
func (e *Engine) InStoreOrder(newestFirst, spell bool, fn func(id uint64, k Key) bool) {
	type ik struct {
		id uint64
		k  Key
	}
	inStoreOrder(e, newestFirst, func(s int32) ik {
		if spell {
			return ik{e.slots[s].id, e.keyOf(s)}
		}
		return ik{id: e.slots[s].id}
	}, func(x ik) bool { return fn(x.id, x.k) })
}

// KeysOf spells the indexed keys whose identity is id: none, one, or several where keys
// share an identity (legacy keys of one chunk on several workers). An eviction order that
// keeps identities instead of keys spells its victims with it.
func (e *Engine) KeysOf(id uint64) []Key { return e.keysOf(id) }

// Close stops workers and the checkpoint thread, writes a final checkpoint when
// Config.FinalCheckpoint, and closes the device.
func (e *Engine) Close() error { return e.close(true) }

// CloseNoCheckpoint closes like a crash after the last checkpoint: no final checkpoint.
// The device is closed.
func (e *Engine) CloseNoCheckpoint() error { return e.close(false) }

// SubmitStore queues PutMany(keys, payloads) on the store pool; never blocks. Payload
// slices must stay untouched until the result is popped.
func (e *Engine) SubmitStore(keys []Key, payloads [][]byte) TaskID {
	return e.submit(TaskStore, keys, payloads)
}

// SubmitLookup queues ExistsMany(keys, lock=true) on the lookup pool; never blocks.
func (e *Engine) SubmitLookup(keys []Key) TaskID { return e.submit(TaskLookup, keys, nil) }

// SubmitLoad queues LoadManyInto(keys, bufs) on the load pool; never blocks.
func (e *Engine) SubmitLoad(keys []Key, bufs [][]byte) TaskID {
	return e.submit(TaskLoad, keys, bufs)
}

// PopCompleted returns up to max completed results (max <= 0: all) in completion order.
func (e *Engine) PopCompleted(max int) []TaskResult { return e.popCompleted(max) }

// Notify returns a channel that receives (coalesced) after tasks complete.
func (e *Engine) Notify() <-chan struct{} { return e.notify }

// EventFD returns an eventfd written (counter += completions) after tasks complete, for
// callers that poll file descriptors. It is created on first use and closed by Close.
func (e *Engine) EventFD() (int, error) { return e.eventFD() }

// WaitTask blocks until the task with id completed and returns its result (removing it
// from the completed queue), or ErrClosed.
func (e *Engine) WaitTask(id TaskID) (TaskResult, error) { return e.waitTask(id) }
