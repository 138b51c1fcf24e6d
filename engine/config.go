package engine

import (
	"fmt"
	"time"

	"github.com/rbctl/rbctl/blockdev"
)

// DefaultBlockAlign and DefaultHeaderBytes are block_align and header_bytes when a
// Config does not set them: every slot starts with a 4096-byte header block, so a slot
// for a payload of n bytes takes DefaultHeaderBytes+n, rounded up to the block alignment.
const (
	DefaultBlockAlign  = 4096
	DefaultHeaderBytes = 4096
)

const (
	defaultSlotBytes = 1 << 20
	defaultMetaTotal = 256 << 20
	defaultMagic     = "LMCIDX01"
)

func defaultConfig() Config {
	return Config{
		BlockAlign:         DefaultBlockAlign,
		HeaderBytes:        DefaultHeaderBytes,
		SlotBytes:          defaultSlotBytes,
		MetaTotalBytes:     defaultMetaTotal,
		MetaMagic:          defaultMagic,
		MetaVersion:        1,
		Periodic:           true,
		CheckpointInterval: 60 * time.Second,
		IdleQuiet:          100 * time.Millisecond,
		ForceAfterOps:      65536,
		ForceAfter:         5 * time.Minute,
		FinalCheckpoint:    true,
		VerifyOnLoad:       true,
		RecoveryReaders:    8,
		LoadCheckpoint:     true,
		Namespace:          NamespaceObject,
		CheckpointFormat:   CheckpointCompact,
		PayloadChecksum:    true,
		StoreWorkers:       2,
		LookupWorkers:      1,
		LoadWorkers:        4,
		QueueDepth:         256,
		MetadataHandle:     blockdev.NoPlacement,
		DeallocateBatch:    64,
	}
}

func cfgErr(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, a...))
}

func (c Config) validate() error {
	if c.BlockAlign <= 0 || c.BlockAlign&(c.BlockAlign-1) != 0 {
		return cfgErr("BlockAlign (block_align)", "%d is not a power of two; use e.g. 4096", c.BlockAlign)
	}
	ba := int64(c.BlockAlign)
	if c.HeaderBytes < 24 {
		return cfgErr("HeaderBytes (header_bytes)", "%d is below the 24-byte slot header; use %d", c.HeaderBytes, c.BlockAlign)
	}
	if int64(c.HeaderBytes)%ba != 0 {
		return cfgErr("HeaderBytes (header_bytes)", "%d is not a multiple of block_align %d; round it to %d", c.HeaderBytes, ba, roundUp(int64(c.HeaderBytes), ba))
	}
	if c.SlotBytes%ba != 0 || c.SlotBytes <= 0 {
		return cfgErr("SlotBytes (slot_bytes)", "%d is not a positive multiple of block_align %d; round it to %d", c.SlotBytes, ba, roundUp(max(c.SlotBytes, 1), ba))
	}
	if c.SlotBytes < int64(c.HeaderBytes)+1 {
		return cfgErr("SlotBytes (slot_bytes)", "%d leaves no room for payload after header_bytes %d; use at least %d", c.SlotBytes, c.HeaderBytes, int64(c.HeaderBytes)+ba)
	}
	if c.SlotBytes-int64(c.HeaderBytes) > 1<<32-1 {
		return cfgErr("SlotBytes (slot_bytes)", "payload capacity %d exceeds 4 GiB; use smaller slots", c.SlotBytes-int64(c.HeaderBytes))
	}
	if c.MetaTotalBytes%ba != 0 || c.MetaTotalBytes < 4*ba {
		return cfgErr("MetaTotalBytes (meta_total_bytes)", "%d must be a multiple of block_align %d and at least %d (two containers of header+payload)", c.MetaTotalBytes, ba, 4*ba)
	}
	if c.CapacityBytes < 0 {
		return cfgErr("CapacityBytes (capacity_bytes)", "%d is negative; use 0 for the whole device", c.CapacityBytes)
	}
	if len(c.MetaMagic) != 8 {
		return cfgErr("MetaMagic (meta_magic)", "%q must be exactly 8 bytes, e.g. %q", c.MetaMagic, defaultMagic)
	}
	switch c.Namespace {
	case NamespaceObject, NamespaceLegacy:
	default:
		return cfgErr("Namespace", "%q is not object or legacy", c.Namespace)
	}
	switch c.CheckpointFormat {
	case CheckpointCompact, CheckpointLMCacheV1:
	default:
		return cfgErr("CheckpointFormat", "%q is not compact or lmcache-v1", c.CheckpointFormat)
	}
	if c.StoreWorkers < 1 || c.LookupWorkers < 1 || c.LoadWorkers < 1 {
		return cfgErr("StoreWorkers/LookupWorkers/LoadWorkers", "%d/%d/%d: each pool needs at least 1 worker (LMCache: 2/1/4)", c.StoreWorkers, c.LookupWorkers, c.LoadWorkers)
	}
	if c.QueueDepth < 1 {
		return cfgErr("QueueDepth", "%d must be >= 1 (default 256)", c.QueueDepth)
	}
	if c.RecoveryReaders < 1 {
		return cfgErr("RecoveryReaders", "%d must be >= 1 (default 8)", c.RecoveryReaders)
	}
	if c.Periodic && c.CheckpointInterval <= 0 {
		return cfgErr("CheckpointInterval", "%v must be positive when Periodic (default 60s)", c.CheckpointInterval)
	}
	if c.SlotGroupBytes < 0 {
		return cfgErr("SlotGroupBytes", "%d is negative; use 0 to disable slot groups", c.SlotGroupBytes)
	}
	if c.SlotGroupBytes > 0 && c.SlotGroupBytes < c.SlotBytes {
		return cfgErr("SlotGroupBytes", "%d is smaller than one slot (%d); use a multiple of slot_bytes such as the reclaim-unit size", c.SlotGroupBytes, c.SlotBytes)
	}
	if c.BufferPoolBytes > maxPoolBytes {
		return cfgErr("BufferPoolBytes", "%d exceeds 1 GiB (the io_uring limit for one registered buffer); use at most %d, 0 for the default or -1 to disable", c.BufferPoolBytes, int64(maxPoolBytes))
	}
	if c.DeallocateOnDelete && c.DeallocateBatch < 1 {
		return cfgErr("DeallocateBatch", "%d must be >= 1 when DeallocateOnDelete", c.DeallocateBatch)
	}
	return nil
}

func computeLayout(c Config, devSize int64) (Layout, error) {
	if err := c.validate(); err != nil {
		return Layout{}, err
	}
	ba := int64(c.BlockAlign)
	capy := devSize
	if c.CapacityBytes > 0 && c.CapacityBytes < devSize {
		capy = c.CapacityBytes
	}
	C := (c.MetaTotalBytes / 2 / ba) * ba
	l := Layout{
		DeviceSize:      devSize,
		Capacity:        capy,
		BlockAlign:      c.BlockAlign,
		HeaderBytes:     c.HeaderBytes,
		SlotBytes:       c.SlotBytes,
		MetaTotalBytes:  c.MetaTotalBytes,
		ContainerBytes:  C,
		ContainerOffset: [2]int64{0, C},
		PayloadCap:      C - ba,
		DataBase:        c.MetaTotalBytes,
	}
	if c.MetaTotalBytes >= capy {
		return l, fmt.Errorf("%w: metadata region (meta_total_bytes %d) is not below the capacity %d; use a larger device or a smaller meta_total_bytes", ErrDeviceTooSmall, c.MetaTotalBytes, capy)
	}
	l.MaxSlots = (capy - c.MetaTotalBytes) / c.SlotBytes
	if l.MaxSlots <= 0 {
		return l, fmt.Errorf("%w: no room for a single %d-byte slot after the %d-byte metadata region (capacity %d); use a larger device or a smaller slot_bytes", ErrDeviceTooSmall, c.SlotBytes, c.MetaTotalBytes, capy)
	}
	if l.MaxSlots > 1<<31-2 {
		return l, cfgErr("SlotBytes (slot_bytes)", "%d slots exceed the index limit of 2^31-2; use larger slots or a smaller capacity_bytes", l.MaxSlots)
	}
	return l, nil
}

// Checkpoint bytes per slot that MetaBytesFor reserves, by format: the most one index
// entry takes in that encoding, with room for long keys.
const (
	metaPerSlotCompact = 128
	metaPerSlotLMCache = 256
	metaContainerSlack = 64 << 10 // per container, beyond the header block and the entries
	metaMinTotalBytes  = 1 << 20
)

// MetaBytesFor is the metadata region (meta_total_bytes) that holds a checkpoint of every
// slot of a cache laid out over capacity bytes (the device, or CapacityBytes when smaller)
// in slotBytes slots: two containers, each a header block, the entries of the format and
// 64 KiB of slack, rounded up to a power of two of at least 1 MiB. A power of two keeps
// container 1 where DetectConfig looks for it when container 0 is damaged. This is what
// rbctl format --meta-bytes auto writes: part of the on-disk layout, do not change.
func MetaBytesFor(capacity, slotBytes int64, blockAlign int, format CheckpointFormat) int64 {
	per := int64(metaPerSlotCompact)
	if format == CheckpointLMCacheV1 {
		per = metaPerSlotLMCache
	}
	slots := int64(0)
	if slotBytes > 0 && capacity > 0 {
		slots = min(capacity/slotBytes, 1<<40) // far above any valid layout (2^31-2 slots); no overflow below
	}
	need := 2 * (int64(min(max(blockAlign, 1), 1<<30)) + slots*per + metaContainerSlack)
	total := int64(metaMinTotalBytes)
	for total < need {
		total <<= 1
	}
	return total
}

func roundUp(v, a int64) int64 { return (v + a - 1) / a * a }
