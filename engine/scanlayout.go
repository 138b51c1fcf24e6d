package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/blockdev"
)

// Finding the layout for a rebuild from the slot headers when no checkpoint is usable: the
// layout lives in the checkpoint payload, which is what is damaged.

// ErrScanLayout marks a scan refused because the layout cannot be known.
var ErrScanLayout = errors.New("the cache layout cannot be known without a usable checkpoint")

// ScanHint is the layout a caller knows (zero fields: unknown).
type ScanHint struct {
	SlotBytes      int64
	HeaderBytes    int
	BlockAlign     int
	MetaTotalBytes int64
}

// DetectScan returns the layout a rebuild from the slot headers (OpenOptions.Scan) uses
// on dev when no container holds a usable checkpoint, and says where it came from. The
// candidates, in order:
//
//  1. hint, when it gives slot_bytes, with the defaults (4096) for an unknown header_bytes
//     and block_align and, for an unknown meta_total_bytes, a power of two of at least
//     1 MiB where a slot header sits, the region a sound container 1 header shows, or the
//     one format's auto sizing gives;
//  2. the layout fields of each damaged checkpoint payload, read although its CRC fails (a
//     compact payload's fixed header, a v1 payload's leading fields).
//
// A candidate counts only when a slot header (magic, a payload_len that fits the slot) is
// found among its first 64 slots, no header whose key record's checksum holds claims more
// payload than its slots hold (nor as many unchecksummed ones as fit; headers whose key
// record fails its checksum, or with payload_len 0, are damaged and left out), and they are
// not all at multiples of one slot number (three or more at every k-th
// slot: the slots are likely k times larger). When a usable checkpoint exists, DetectScan
// is Detect.
func DetectScan(dev blockdev.Device, hint ScanHint) (Detection, error) {
	if d, err := detect(dev); err == nil && d.Selection.Container >= 0 {
		d.LayoutSource = "the checkpoint"
		return d, nil
	}
	size := dev.Info().Size
	type cand struct {
		cfg     Config
		src     string
		payload bool // from a damaged checkpoint's fields
	}
	var cands []cand
	if hint.SlotBytes > 0 {
		c := DefaultConfig()
		c.SlotBytes = hint.SlotBytes
		if hint.HeaderBytes > 0 {
			c.HeaderBytes = hint.HeaderBytes
		}
		if hint.BlockAlign > 0 {
			c.BlockAlign = hint.BlockAlign
		}
		metas := []int64{hint.MetaTotalBytes}
		if hint.MetaTotalBytes <= 0 {
			metas = nil
			if m, ok := slotHeaderAtDataBase(dev, size); ok {
				metas = append(metas, m)
			}
			if c1 := soundContainerOffset(dev, int64(c.BlockAlign), size); c1 > 0 {
				metas = append(metas, 2*c1, 2*c1+int64(c.BlockAlign))
			}
			metas = append(metas, MetaBytesFor(size, c.SlotBytes, c.BlockAlign, CheckpointCompact),
				MetaBytesFor(size, c.SlotBytes, c.BlockAlign, CheckpointLMCacheV1))
		}
		for i, m := range metas {
			if slices.Contains(metas[:i], m) {
				continue
			}
			c.MetaTotalBytes = m
			cands = append(cands, cand{c, "the given slot_bytes", false})
		}
	}
	for _, lc := range damagedLayouts(dev, size) {
		cands = append(cands, cand{lc.cfg, lc.src, true})
	}
	if len(cands) == 0 {
		return Detection{Config: DefaultConfig(), Selection: Selection{Container: -1, Namespace: NamespaceObject}},
			fmt.Errorf("%w: no metadata container payload holds readable layout fields and no slot_bytes was given", ErrScanLayout)
	}
	var tried []string
	for _, c := range cands {
		lay, err := computeLayout(c.cfg, size)
		if err != nil {
			tried = append(tried, c.src+": "+err.Error())
			continue
		}
		hits, ns, bad := sampleSlots(dev, c.cfg, lay)
		if hits == 0 || bad != "" {
			why := "no slot header among the first 64 slots"
			if bad != "" {
				why = bad
			}
			tried = append(tried, fmt.Sprintf("%s (slot_bytes %d, meta_total_bytes %d): %s", c.src, c.cfg.SlotBytes, c.cfg.MetaTotalBytes, why))
			continue
		}
		sc := scanContainers(dev, c.cfg, lay)
		sel, _ := selectCheckpoint(dev, lay, &sc)
		switch {
		case ns != "":
			c.cfg.Namespace, sel.NamespaceSource = ns, "the key records of the slot headers"
		case c.payload:
			sel.NamespaceSource = "the damaged checkpoint's layout fields"
		default:
			sel.NamespaceSource = "" // nothing tells: a writer needs it given
		}
		sel.Namespace = c.cfg.Namespace
		return Detection{Config: c.cfg, Selection: sel, LayoutSource: c.src}, nil
	}
	return Detection{Config: DefaultConfig(), Selection: Selection{Container: -1, Namespace: NamespaceObject}},
		fmt.Errorf("%w: no candidate layout matches the slot headers: %s", ErrScanLayout, strings.Join(tried, "; "))
}

// soundContainerOffset finds container 1 by a header whose magic, version and length
// decode (its payload may fail its CRC) at the offsets format's power-of-two regions
// give; 0 when none.
func soundContainerOffset(dev blockdev.Device, ba, size int64) int64 {
	for _, off := range candidateOffsets(ba, size)[1:] {
		if _, _, ok := readDamaged(dev, ba, off, size, false); ok {
			return off
		}
	}
	return 0
}

// readDamaged reads the container at off whose header decodes, and (withPayload) its
// payload without checking the CRC.
func readDamaged(dev blockdev.Device, ba, off, size int64, withPayload bool) (containerHeader, []byte, bool) {
	hb, err := blockdev.Alloc(int(ba))
	if err != nil {
		return containerHeader{}, nil, false
	}
	defer blockdev.Free(hb)
	if off+ba > size || blockdev.ReadAt(dev, hb, off) != nil || allZero(hb[:8]) {
		return containerHeader{}, nil, false
	}
	h, err := decodeContainerHeader(hb, string(hb[:8]), binary.LittleEndian.Uint32(hb[8:]), min(size-off-ba, 1<<30))
	if err != nil || !withPayload {
		return h, nil, err == nil
	}
	n := min(int64(h.Len), 64<<10) // the layout fields are at the start
	pb, err := blockdev.Alloc(int(roundUp(n, ba)))
	if err != nil {
		return h, nil, false
	}
	defer blockdev.Free(pb)
	if blockdev.ReadAt(dev, pb, off+ba) != nil {
		return h, nil, false
	}
	return h, append([]byte(nil), pb[:n]...), true
}

type layoutCand struct {
	cfg Config
	src string
}

// damagedLayouts reads the layout fields of every container payload whose header decodes,
// at the offsets Detect tries, CRC or not.
func damagedLayouts(dev blockdev.Device, size int64) []layoutCand {
	var out []layoutCand
	for _, ba := range []int64{4096, 512, 1024, 2048, 8192, 16384, 32768, 65536} {
		if size < 2*ba {
			continue
		}
		for _, off := range candidateOffsets(ba, size) {
			h, p, ok := readDamaged(dev, ba, off, size, true)
			if !ok {
				continue
			}
			c, ok := lenientLayout(p, size)
			if !ok || int64(c.BlockAlign) != ba || c.MetaMagic != string(h.Magic[:]) || c.MetaVersion != h.Version ||
				(off != 0 && (c.MetaTotalBytes/2/ba)*ba != off) {
				continue
			}
			out = append(out, layoutCand{c, fmt.Sprintf("the layout fields of the damaged checkpoint at offset %d (seq %d)", off, h.Seq)})
		}
	}
	return out
}

// lenientLayout reads the layout fields at the start of a checkpoint payload whose CRC may
// fail: the fixed header of a compact payload, the leading fields of a v1 JSON one.
func lenientLayout(p []byte, size int64) (Config, bool) {
	c := DefaultConfig()
	le := binary.LittleEndian
	switch {
	case len(p) >= compactV1HdrLen && string(p[:8]) == compactMagic:
		c.CheckpointFormat = CheckpointCompact
		if le.Uint32(p[12:])&ckFlagLegacy != 0 {
			c.Namespace = NamespaceLegacy
		}
		c.BlockAlign, c.HeaderBytes = int(le.Uint32(p[16:])), int(le.Uint32(p[20:]))
		c.SlotBytes, c.MetaTotalBytes = int64(le.Uint64(p[24:])), int64(le.Uint64(p[32:]))
		if capy := int64(le.Uint64(p[40:])); capy > 0 && capy < size {
			c.CapacityBytes = capy
		}
		c.MetaMagic, c.MetaVersion = string(p[48:56]), le.Uint32(p[56:])
		off := compactV1HdrLen
		if le.Uint32(p[8:]) >= 2 {
			off = compactHdrLen
		}
		if n, k := binary.Uvarint(p[min(off, len(p)):]); k > 0 && n < 4096 && off+k+int(n) <= len(p) {
			c.DevicePath = string(p[off+k : off+k+int(n)])
		}
	case len(p) > 0 && p[0] == '{':
		c.CheckpointFormat = CheckpointLMCacheV1
		head := string(p)
		if i := strings.Index(head, `"entries":`); i >= 0 {
			head = head[:i]
		}
		num := func(name string) (int64, bool) {
			i := strings.Index(head, `"`+name+`":`)
			if i < 0 {
				return 0, false
			}
			rest := head[i+len(name)+3:]
			j := strings.IndexAny(rest, ",}")
			if j < 0 {
				return 0, false
			}
			v, err := strconv.ParseInt(rest[:j], 10, 64)
			return v, err == nil
		}
		str := func(name string) (string, bool) {
			i := strings.Index(head, `"`+name+`":"`)
			if i < 0 {
				return "", false
			}
			rest := head[i+len(name)+4:]
			j := strings.IndexByte(rest, '"')
			if j < 0 || strings.ContainsRune(rest[:j], '\\') {
				return "", false
			}
			return rest[:j], true
		}
		var ok [6]bool
		var ba, hb, mv int64
		ba, ok[0] = num("block_align")
		hb, ok[1] = num("header_bytes")
		c.SlotBytes, ok[2] = num("slot_bytes")
		c.MetaTotalBytes, ok[3] = num("meta_total_bytes")
		c.MetaMagic, ok[4] = str("meta_magic")
		mv, ok[5] = num("meta_version")
		if ok != [6]bool{true, true, true, true, true, true} || ba <= 0 || ba > 1<<30 || hb <= 0 || hb > 1<<30 || mv < 0 || mv > 1<<32-1 {
			return c, false
		}
		c.BlockAlign, c.HeaderBytes, c.MetaVersion = int(ba), int(hb), uint32(mv)
		if capy, ok := num("capacity_bytes"); ok && capy > 0 && capy < size {
			c.CapacityBytes = capy
		}
		if dp, ok := str("device_path"); ok {
			c.DevicePath = dp
		}
	default:
		return c, false
	}
	return c, c.validate() == nil
}

// sampleSlots reads the headers of the first 64 slots of a candidate layout: how many are
// slot headers, the namespace most of their key records carry ("" when none has one), and
// why the layout is wrong when a header claims more payload than a slot holds.
func sampleSlots(dev blockdev.Device, cfg Config, lay Layout) (hits int, ns Namespace, bad string) {
	n := min(lay.MaxSlots, 64)
	ba := int64(cfg.BlockAlign)
	buf, err := blockdev.Alloc(int(ba))
	if err != nil {
		return 0, "", ""
	}
	defer blockdev.Free(buf)
	var legacy, object, over int
	var firstOver string
	var g int64 // of the slot numbers with a header: 2 or more when only every k-th has one
	for s := int64(0); s < n; s++ {
		if blockdev.ReadAt(dev, buf, lay.SlotOffset(s)) != nil {
			continue
		}
		hdr := buf[:min(int64(cfg.HeaderBytes), ba)]
		h, err := decodeSlotHeader(hdr)
		if err != nil || h.Len == 0 || keyRecordState(hdr) < 0 {
			continue // damaged: its key record's CRC (which covers payload_len) fails, or no slot holds 0 bytes
		}
		if int64(h.Len) > lay.PayloadBytes() {
			why := fmt.Sprintf("slot %d's header has payload_len %d, more than a %d-byte slot holds", s, h.Len, cfg.SlotBytes)
			if h.HasKey {
				return hits, "", why // checksummed: the layout is wrong
			}
			// No key record vouches for it: one damaged header must not hide every other
			// slot, so the layout is refused only when such headers are as many as those that fit.
			if over++; firstOver == "" {
				firstOver = why
			}
			continue
		}
		hits++
		g = gcd(g, s)
		if h.HasKey && h.Legacy {
			legacy++
		} else if h.HasKey {
			object++
		}
	}
	if over > 0 && over >= hits {
		return hits, "", fmt.Sprintf("%s (%d of the %d headers read claim more)", firstOver, over, over+hits)
	}
	if g >= 2 && hits >= 3 {
		return hits, "", fmt.Sprintf("slot headers only at slot numbers that are multiples of %d: slot_bytes is likely %d", g, g*cfg.SlotBytes)
	}
	switch {
	case legacy > object:
		ns = NamespaceLegacy
	case object > 0:
		ns = NamespaceObject
	}
	return hits, ns, ""
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
