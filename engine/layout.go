package engine

// The on-disk geometry: a metadata region of two alternating checkpoint containers, then
// fixed-size slots, each a header block followed by the payload (docs/format.md). The
// arithmetic here is the one implementation; the simulator lays out its model with it.

// Layout is the geometry derived from a Config and a device size.
type Layout struct {
	DeviceSize      int64
	Capacity        int64 // effective capacity
	BlockAlign      int
	HeaderBytes     int
	SlotBytes       int64
	MetaTotalBytes  int64
	ContainerBytes  int64 // C
	ContainerOffset [2]int64
	PayloadCap      int64 // C - block_align
	DataBase        int64 // = MetaTotalBytes
	MaxSlots        int64
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
		return l, fieldErr(ErrDeviceTooSmall, []string{"meta_total_bytes", "capacity_bytes"}, "metadata region (meta_total_bytes %d) is not below the capacity %d; use a larger device or a smaller meta_total_bytes", c.MetaTotalBytes, capy)
	}
	l.MaxSlots = (capy - c.MetaTotalBytes) / c.SlotBytes
	if l.MaxSlots <= 0 {
		return l, fieldErr(ErrDeviceTooSmall, []string{"slot_bytes", "meta_total_bytes", "capacity_bytes"}, "no room for a single %d-byte slot after the %d-byte metadata region (capacity %d); use a larger device or a smaller slot_bytes", c.SlotBytes, c.MetaTotalBytes, capy)
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

// SlotOffset is the byte offset of slot's header on the device (slots follow the metadata
// region back to back).
func (l Layout) SlotOffset(slot int64) int64 { return l.DataBase + slot*l.SlotBytes }

// SlotOf is the slot whose bytes hold device offset off; false for the metadata region
// and for offsets past the last slot.
func (l Layout) SlotOf(off int64) (int64, bool) {
	if off < l.DataBase || l.SlotBytes <= 0 {
		return 0, false
	}
	s := (off - l.DataBase) / l.SlotBytes
	return s, s < l.MaxSlots
}

// SlotWriteBytes is how many bytes a put of a payload of n bytes writes at its slot's
// offset: the header block and the payload, rounded up to the block alignment. At most
// SlotBytes for any payload PutMany accepts (n <= PayloadBytes()).
func (l Layout) SlotWriteBytes(n int) int64 {
	return roundUp(int64(l.HeaderBytes)+int64(n), int64(max(l.BlockAlign, 1)))
}

// PayloadBytes is the largest payload a slot holds (slot_bytes - header_bytes).
func (l Layout) PayloadBytes() int64 { return l.SlotBytes - int64(l.HeaderBytes) }

// ContainerOffsetFor is the offset of the container checkpoint seq is written to:
// checkpoints alternate, seq n going to container (n-1) mod 2 (Format writes seq 1 to
// container 0). The header block comes first, the payload one block after it.
func (l Layout) ContainerOffsetFor(seq uint64) int64 { return l.ContainerOffset[seqContainer(seq)] }

// SlotBytesFor is the smallest slot_bytes holding a payload of n bytes behind the default
// header, at the default block alignment.
func SlotBytesFor(n int) int64 {
	return roundUp(int64(DefaultHeaderBytes)+int64(max(n, 1)), DefaultBlockAlign)
}
