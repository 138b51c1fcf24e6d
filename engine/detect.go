package engine

import (
	"fmt"
	"hash/crc32"

	"github.com/rbctl/rbctl/blockdev"
)

// Detecting the layout of a formatted device without a config (Detect, DetectConfig) and
// naming the first layout field where two configs differ.

// Detection is what Detect read from a formatted device.
type Detection struct {
	// Config has the layout, namespace and checkpoint format of the checkpoint recovery
	// would choose; other fields are DefaultConfig's.
	Config Config
	// Selection says which container that is and why. Its NamespaceSource is "" when
	// nothing on the device tells the namespace (Config.Namespace is then the default,
	// object): an empty LMCache v1 checkpoint records none.
	Selection Selection
	// LayoutSource says where DetectScan found the layout ("" from Detect: the checkpoint).
	LayoutSource string
	// read is what Detect read and decoded, for Open to use instead of reading it again
	// (OpenOptions.Detected); nil when there is nothing to reuse.
	read *detectRead
}

// detectRead is the containers Detect read, the selection it made over them and the
// checkpoint it chose, with what they depend on: the device, the layout and the container
// header fields of the config they were read with.
type detectRead struct {
	path     string
	size     int64
	lay      Layout
	magic    string
	version  uint32
	sc       [2]scanned
	sel      Selection
	st       *ckptState
	consumed bool
}

// reuse returns what d read when it was read from dev with the layout and container header
// fields cfg gives (lay), once: the chosen checkpoint is applied by one Open.
func (d *Detection) reuse(dev blockdev.Device, cfg Config, lay Layout) *detectRead {
	if d == nil || d.read == nil {
		return nil
	}
	r := d.read
	info := dev.Info()
	if r.consumed || r.path != info.Path || r.size != info.Size || r.lay != lay || r.magic != cfg.MetaMagic || r.version != cfg.MetaVersion {
		return nil
	}
	r.consumed = true
	return r
}

// Detect infers the layout, namespace and checkpoint format of a formatted device from the
// checkpoint recovery would choose, and says which one that is (read-only).
func Detect(dev blockdev.Device) (Detection, error) { return detect(dev) }

func detectConfig(dev blockdev.Device) (Config, error) {
	d, err := detect(dev)
	return d.Config, err
}

// detect finds the geometry from the first sound container at a candidate offset, then
// runs checkpoint selection over both containers of that geometry: namespace and format
// come from the chosen checkpoint, not from whichever container was found first.
func detect(dev blockdev.Device) (Detection, error) {
	size := dev.Info().Size
	tried := 0
	for _, ba := range []int64{4096, 512, 1024, 2048, 8192, 16384, 32768, 65536} {
		if size < 2*ba {
			continue
		}
		if lb := int64(dev.Info().LogicalBlock); dev.Info().Direct && ba%lb != 0 {
			continue
		}
		for _, off := range candidateOffsets(ba, size) {
			tried++
			if f, ok := tryContainer(dev, ba, off, size); ok {
				return detectFrom(dev, f, size)
			}
		}
	}
	none := Detection{Config: DefaultConfig(), Selection: Selection{Container: -1, Namespace: NamespaceObject}}
	if off, ok := damagedContainer(dev, size); ok {
		return none, fmt.Errorf("%w (%w): the metadata container header at offset %d decodes but no container's checkpoint passes its CRC (at %d candidate offsets): the checkpoints are damaged; the key records in the slot headers can rebuild the index", ErrNoCheckpoint, ErrCorrupt, off, tried)
	}
	if off, ok := slotHeaderAtDataBase(dev, size); ok {
		return none, fmt.Errorf("%w (%w): no metadata container found at %d candidate offsets, but a slot header sits at offset %d, where a metadata region of that size ends: the checkpoints are gone and the slots remain; the key records in the slot headers can rebuild the index", ErrNoCheckpoint, ErrCorrupt, tried, off)
	}
	return none, fmt.Errorf("%w: no metadata container with a valid header and CRC found at %d candidate offsets; is the device formatted?", ErrNoCheckpoint, tried)
}

// damagedContainer finds a container header that decodes (magic, version, length) at the
// offsets detect tries: a formatted device whose checkpoints are damaged.
func damagedContainer(dev blockdev.Device, size int64) (int64, bool) {
	for _, ba := range []int64{4096, 512} {
		for _, off := range candidateOffsets(ba, size) {
			if _, _, ok := readDamaged(dev, ba, off, size, false); ok {
				return off, true
			}
		}
	}
	return 0, false
}

// slotHeaderAtDataBase looks for a slot header where format's power-of-two metadata
// regions end (slot 0 is the first a cache writes).
func slotHeaderAtDataBase(dev blockdev.Device, size int64) (int64, bool) {
	b, err := blockdev.Alloc(4096)
	if err != nil {
		return 0, false
	}
	defer blockdev.Free(b)
	for m := int64(1 << 20); m <= 16<<30 && m+4096 <= size; m <<= 1 {
		if blockdev.ReadAt(dev, b, m) == nil && string(b[:8]) == slotMagic {
			return m, true
		}
	}
	return 0, false
}

// configFrom is DefaultConfig with the layout and format a checkpoint records.
func configFrom(st *ckptState, size int64) Config {
	cfg := DefaultConfig()
	cfg.BlockAlign = int(st.blockAlign)
	cfg.HeaderBytes = int(st.headerBytes)
	cfg.SlotBytes = st.slotBytes
	cfg.MetaTotalBytes = st.metaTotal
	cfg.MetaMagic = st.metaMagic
	cfg.MetaVersion = uint32(st.metaVersion)
	cfg.CheckpointFormat = st.format
	if st.capacity > 0 && st.capacity < size {
		cfg.CapacityBytes = st.capacity
	}
	return cfg
}

func detectFrom(dev blockdev.Device, f *found, size int64) (Detection, error) {
	d := Detection{Config: configFrom(f.st, size), Selection: Selection{Container: -1, Namespace: NamespaceObject}}
	if err := d.Config.validate(); err != nil {
		return d, fmt.Errorf("detected layout is invalid: %w", err)
	}
	lay, err := computeLayout(d.Config, size)
	if err != nil {
		// The checkpoint was written on a device large enough for it: this one shrank
		// (a truncated image) or is not the device it was written on.
		return d, fmt.Errorf("detected layout does not fit the device (%d bytes, smaller than the checkpoint's layout needs: a truncated image, or not the device the cache was written on?): %w", size, err)
	}
	sc := scanContainersKnowing(dev, d.Config, lay, f)
	sel, chosen := selectCheckpoint(dev, lay, &sc)
	d.Selection = sel
	d.read = &detectRead{path: dev.Info().Path, size: size, lay: lay, magic: d.Config.MetaMagic, version: d.Config.MetaVersion,
		sc: sc, sel: sel, st: chosen}
	if chosen != nil {
		if c := configFrom(chosen, size); c.validate() == nil {
			d.Config = c // the two containers of one layout agree; if not, the chosen one's
		}
	}
	d.Config.Namespace = sel.Namespace
	return d, nil
}

// v1KeysAreLegacy reports whether every key of a namespace-less (LMCache v1 JSON)
// checkpoint has LMCache's legacy CacheEngineKey shape. Object keys never do (their second
// field is "0x%08x"), so such a checkpoint was written by LMCache's non-MP legacy backend,
// whose slot identities are chunk hashes, not BLAKE2b of the key.
func v1KeysAreLegacy(st *ckptState) bool {
	st.fillKeys()
	if len(st.entries) == 0 {
		return false
	}
	for i := range st.entries {
		if _, ok := legacyChunkHash(st.entries[i].key); !ok {
			return false
		}
	}
	return true
}

func candidateOffsets(ba, size int64) []int64 {
	offs := []int64{0}
	for m := int64(1 << 20); m <= 8<<30 && m < size; m <<= 1 {
		c := (m / 2 / ba) * ba
		offs = append(offs, c)
	}
	return offs
}

func tryContainer(dev blockdev.Device, ba, off, size int64) (*found, bool) {
	hb, err := blockdev.Alloc(int(ba))
	if err != nil {
		return nil, false
	}
	defer blockdev.Free(hb)
	if off+ba > size || blockdev.ReadAt(dev, hb, off) != nil {
		return nil, false
	}
	magic := string(hb[:8])
	if allZero(hb[:8]) {
		return nil, false
	}
	h, err := decodeContainerHeader(hb, magic, uint32(hb[8])|uint32(hb[9])<<8|uint32(hb[10])<<16|uint32(hb[11])<<24, size)
	if err != nil || off+ba+int64(h.Len) > size {
		return nil, false
	}
	// A payload at off+ba starts as a checkpoint does, or ba is not this cache's block
	// alignment: a 512-aligned cache's header at 0 is also read as a 4096-aligned one's,
	// whose payload would start 3.5 KiB into the real one (a 4M-entry checkpoint, 247 MB,
	// was read and checksummed for nothing). Nothing that passes here decodes otherwise.
	if blockdev.ReadAt(dev, hb, off+ba) != nil || !payloadStart(hb[:min(int64(len(hb)), int64(h.Len))]) {
		return nil, false
	}
	p, err := readPayload(dev, off+ba, int64(h.Len), ba)
	if err != nil || crc32.ChecksumIEEE(p) != h.CRC {
		return nil, false
	}
	st, err := decodeCheckpointLazy(p)
	if err != nil || st.blockAlign != ba || st.metaMagic != magic {
		return nil, false
	}
	if off != 0 && (st.metaTotal/2/ba)*ba != off {
		return nil, false
	}
	return &found{off: off, len: h.Len, crc: h.CRC, payload: p, st: st}, true
}

// found is the container detect found first: its payload, checked against its header's
// CRC, and that payload decoded; the scan of both containers takes them instead of reading
// and decoding that container again.
type found struct {
	off     int64
	len     uint64
	crc     uint32
	payload []byte
	st      *ckptState
}

// payloadStart reports whether b, a checkpoint payload's first bytes, can begin one: the
// compact magic, or a JSON object after white space (all white space: cannot tell).
func payloadStart(b []byte) bool {
	if len(b) >= 8 && string(b[:8]) == compactMagic {
		return true
	}
	for _, c := range b {
		switch c {
		case ' ', '\n', '\t', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return true
}

// layoutDiff names the first layout field where a detected config differs from cfg.
func layoutDiff(got, want Config) error {
	mis := func(field string, g, w any) error {
		return fieldErr(ErrLayoutMismatch, []string{field}, "the device was formatted with %s %v but the config has %v; open with %s %v (or reformat)", field, g, w, field, g)
	}
	switch {
	case got.BlockAlign != want.BlockAlign:
		return mis("block_align", got.BlockAlign, want.BlockAlign)
	case got.HeaderBytes != want.HeaderBytes:
		return mis("header_bytes", got.HeaderBytes, want.HeaderBytes)
	case got.SlotBytes != want.SlotBytes:
		return mis("slot_bytes", got.SlotBytes, want.SlotBytes)
	case got.MetaTotalBytes != want.MetaTotalBytes:
		return mis("meta_total_bytes", got.MetaTotalBytes, want.MetaTotalBytes)
	case got.MetaMagic != want.MetaMagic:
		return mis("meta_magic", got.MetaMagic, want.MetaMagic)
	case got.MetaVersion != want.MetaVersion:
		return mis("meta_version", got.MetaVersion, want.MetaVersion)
	}
	return nil
}
