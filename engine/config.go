package engine

import (
	"fmt"
	"time"

	"github.com/rbctl/rbctl/placement"
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
		MetadataHandle:     placement.None,
		DeallocateBatch:    64,
		DeallocateAge:      50 * time.Millisecond,
	}
}

func cfgErr(field, format string, a ...any) error {
	var fields []string
	if f := configField(field); f != "" {
		fields = []string{f}
	}
	return fieldErr(ErrConfig, fields, "%s: %s", field, fmt.Sprintf(format, a...))
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
	if c.DeallocateAge < 0 {
		return cfgErr("DeallocateAge", "%v is negative; use 0 to deallocate only in batches", c.DeallocateAge)
	}
	if c.DeallocateOnDelete && c.DeallocateBatch < 1 {
		return cfgErr("DeallocateBatch", "%d must be >= 1 when DeallocateOnDelete", c.DeallocateBatch)
	}
	return nil
}
