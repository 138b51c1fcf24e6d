package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/blockdev"
)

// scanned is one metadata container as read from the device.
type scanned struct {
	info    ContainerInfo
	hdrOK   bool      // the header decoded: its seq and payload_len mean something
	payload []byte    // the payload read: CRC-checked when info.Valid, else kept to count what is lost
	seal    sealState // rbctl's header seal (checkpoint.go)
	sealSeq uint64
}

// scanContainers reads both container headers and, for those whose header is sound, the
// payload, checking its CRC. It never writes.
func scanContainers(dev blockdev.Device, cfg Config, lay Layout) [2]scanned {
	var out [2]scanned
	ba := int64(cfg.BlockAlign)
	for i := 0; i < 2; i++ {
		sc := &out[i]
		ci := &sc.info
		ci.Index, ci.Offset = i, lay.ContainerOffset[i]
		hb, err := blockdev.Alloc(int(ba))
		if err != nil {
			ci.Problem = err.Error()
			continue
		}
		err = blockdev.ReadAt(dev, hb, ci.Offset)
		if err != nil {
			blockdev.Free(hb)
			ci.Problem = "read error: " + err.Error()
			continue
		}
		h, err := decodeContainerHeader(hb, cfg.MetaMagic, cfg.MetaVersion, lay.PayloadCap)
		sc.sealSeq, sc.seal = checkSeal(hb)
		blockdev.Free(hb)
		ci.Magic, ci.Version, ci.Seq, ci.PayloadLen, ci.CRC = printable(h.Magic[:]), h.Version, h.Seq, h.Len, h.CRC
		if err != nil {
			if errors.Is(err, ErrNoCheckpoint) {
				ci.Problem = "empty"
			} else {
				ci.Problem = err.Error()
			}
			continue
		}
		sc.hdrOK = true
		pb, err := blockdev.Alloc(int(roundUp(int64(h.Len), ba)))
		if err != nil {
			ci.Problem = err.Error()
			continue
		}
		if err := blockdev.ReadAt(dev, pb, ci.Offset+ba); err != nil {
			blockdev.Free(pb)
			ci.Problem = "payload read error: " + err.Error()
			continue
		}
		p := append([]byte(nil), pb[:h.Len]...)
		blockdev.Free(pb)
		sc.payload = p
		ci.ComputedCRC = crc32.ChecksumIEEE(p)
		if ci.ComputedCRC != h.CRC {
			ci.Problem = fmt.Sprintf("%v: header CRC %08x, payload CRC %08x", ErrChecksum, h.CRC, ci.ComputedCRC)
			continue
		}
		switch {
		case len(p) >= 8 && string(p[:8]) == compactMagic:
			ci.Format = CheckpointCompact
		case len(p) > 0 && p[0] == '{':
			ci.Format = CheckpointLMCacheV1
		}
		ci.Valid = true
	}
	return out
}

func infosOf(sc [2]scanned) [2]ContainerInfo { return [2]ContainerInfo{sc[0].info, sc[1].info} }

func readContainers(dev blockdev.Device, cfg Config) ([2]ContainerInfo, error) {
	lay, err := computeLayout(cfg, dev.Info().Size)
	if err != nil {
		return [2]ContainerInfo{}, err
	}
	return infosOf(scanContainers(dev, cfg, lay)), nil
}

// checkLayout rejects a checkpoint whose layout differs from cfg (LMCache's
// _apply_loaded_state checks, plus namespace for compact checkpoints).
func (e *Engine) checkLayout(st *ckptState) error {
	c := e.cfg
	mis := func(field string, got, want any) error {
		return fmt.Errorf("%w: %s is %v on the device but %v in the config; open with --%s %v (or reformat)", ErrLayoutMismatch, field, got, want, flagName(field), got)
	}
	if st.version != 1 {
		return fmt.Errorf("%w: checkpoint state version %d", ErrBadVersion, st.version)
	}
	if st.hasDevPath && c.DevicePath != "" && st.devicePath != c.DevicePath {
		return fmt.Errorf("%w: device_path is %q in the checkpoint but %q was opened; open the same path (or leave DevicePath empty)", ErrLayoutMismatch, st.devicePath, c.DevicePath)
	}
	if st.metaVersion < 0 || st.metaVersion > math.MaxUint32 {
		return mis("meta_version", st.metaVersion, c.MetaVersion)
	}
	onDisk := Config{BlockAlign: int(st.blockAlign), HeaderBytes: int(st.headerBytes), SlotBytes: st.slotBytes,
		MetaTotalBytes: st.metaTotal, MetaMagic: st.metaMagic, MetaVersion: uint32(st.metaVersion)}
	if err := layoutDiff(onDisk, c); err != nil {
		return err
	}
	if st.hasNS && st.legacyNS != (c.Namespace == NamespaceLegacy) {
		ns := NamespaceObject
		if st.legacyNS {
			ns = NamespaceLegacy
		}
		return mis("namespace", ns, c.Namespace)
	}
	if st.nextSlot < 0 || st.nextSlot > e.layout.MaxSlots {
		return fmt.Errorf("%w: next_slot %d outside [0, %d] (max_slots); the checkpoint belongs to a larger device or capacity_bytes", ErrLayoutMismatch, st.nextSlot, e.layout.MaxSlots)
	}
	return nil
}

func flagName(field string) string {
	switch field {
	case "block_align":
		return "block-align"
	case "header_bytes":
		return "header-bytes"
	case "slot_bytes":
		return "slot-bytes"
	case "meta_total_bytes":
		return "meta-bytes"
	case "meta_magic":
		return "meta-magic"
	case "meta_version":
		return "meta-version"
	}
	return field
}

// OpenOptions are Open's choices that are about one recovery rather than the cache.
type OpenOptions struct {
	// Context, when set, stops the slot verification of recovery: Open then returns an
	// error wrapping ctx.Err() and has written nothing.
	Context context.Context
	// AcceptDoubt opens for writing even when checkpoint selection is in doubt
	// (Selection.Doubt); the next checkpoint then replaces the rejected container.
	AcceptDoubt bool
}

// OpenWith is Open with per-recovery options.
func OpenWith(dev blockdev.Device, cfg Config, opts OpenOptions) (*Engine, error) {
	return openWith(dev, cfg, opts)
}

func open(dev blockdev.Device, cfg Config) (*Engine, error) { return openWith(dev, cfg, OpenOptions{}) }

// seqBase is the engine's seq after recovering seq s from container c: the next
// checkpoint must go to the other container, never over the one recovered from.
func seqBase(s uint64, c int) uint64 {
	if seqContainer(s+1) == 1-c {
		return s
	}
	return s + 1
}

func openWith(dev blockdev.Device, cfg Config, opts OpenOptions) (*Engine, error) {
	e, err := newEngine(dev, cfg)
	if err != nil {
		return nil, err
	}
	e.setupBuffers()
	ok := false
	defer func() {
		if !ok {
			e.releaseBuffers()
		}
	}()
	start := time.Now()
	sc := scanContainers(dev, cfg, e.layout)
	sel, st := selectCheckpoint(dev, e.layout, &sc)
	e.recovery.Containers = infosOf(sc)
	e.recovery.Selection = sel
	if st != nil {
		e.seq = seqBase(sel.Seq, sel.Container)
	} else {
		for i := range sc { // nothing to recover: write past every readable header
			if sc[i].hdrOK && newer(sc[i].info.Seq, e.seq) {
				e.seq = sc[i].info.Seq
			}
		}
	}
	e.seqPub.Store(e.seq)
	if !cfg.LoadCheckpoint {
		if !cfg.ReadOnly {
			e.dirty = 1
		}
		e.start()
		ok = true
		return e, nil
	}
	if st == nil {
		if !sc[0].info.Valid && !sc[1].info.Valid && sel.Candidates[0].Entries < 0 && sel.Candidates[1].Entries < 0 {
			if dc, derr := detectConfig(dev); derr == nil {
				if err := layoutDiff(dc, cfg); err != nil {
					return nil, err
				}
			}
		}
		return nil, fmt.Errorf("%w on the device: container 0: %s; container 1: %s (the device is not formatted, or was formatted with another meta_total_bytes, block_align or meta_magic)",
			ErrNoCheckpoint, sc[0].info.Problem, sc[1].info.Problem)
	}
	if sel.Doubt && !cfg.ReadOnly && !opts.AcceptDoubt {
		return nil, fmt.Errorf("%w: %s", ErrSelectionDoubt, sel.Reason)
	}
	e.recovery.Container, e.recovery.Seq, e.recovery.Format = sel.Container, sel.Seq, st.format
	if err := e.checkLayout(st); err != nil {
		return nil, err
	}
	if !st.hasNS && sel.NamespaceSource == "slot headers" && sel.Namespace != cfg.Namespace {
		return nil, fmt.Errorf("%w: the slot headers of the checkpoint's entries carry %s-namespace identities but the config has namespace %s; open it with namespace %s", ErrLayoutMismatch, sel.Namespace, cfg.Namespace, sel.Namespace)
	}
	if e.cfg.DevicePath == "" && st.hasDevPath {
		e.cfg.DevicePath = st.devicePath
	}
	e.applyState(st)
	if cfg.VerifyOnLoad {
		if err := e.verifyEntries(opts.Context); err != nil {
			return nil, err
		}
		e.recovery.Verified = true
	}
	e.rebuildFree()
	e.recovery.Kept = int(e.live)
	e.recovery.FreeSlots = e.alloc.nfree
	e.recovery.NextSlot = e.nextSlot
	e.recovery.Duration = time.Since(start)
	if len(e.recovery.Dropped) > 0 && !cfg.ReadOnly {
		e.dirty = 1 // persist the repaired index at the next checkpoint
		e.firstDirt = e.now()
	}
	e.start()
	ok = true
	return e, nil
}

// RepairCheckpoints writes the recovered index as a new checkpoint even when nothing
// changed since Open, so the container recovery rejected (corrupt, or holding a damaged
// seq) is replaced; when the container recovered from had a damaged header seq too, it
// writes a second checkpoint over that one. Both then hold the same index, so a crash in
// between loses nothing. rbctl recover uses it.
func (e *Engine) RepairCheckpoints() error {
	if err := e.writeCheckpoint(true, true); err != nil {
		return err
	}
	if c := e.recovery.Selection.Container; c >= 0 && e.recovery.Selection.Candidates[c].Damaged() {
		return e.writeCheckpoint(true, true)
	}
	return nil
}

// applyState inserts the checkpoint's entries, dropping those LMCache would skip and
// those that would make two entries share a slot or a key.
func (e *Engine) applyState(st *ckptState) {
	e.recovery.Loaded = len(st.entries)
	maxPayload := e.cfg.SlotBytes - int64(e.cfg.HeaderBytes)
	base := e.layout.DataBase
	drop := func(ce *ckptEntry, slot int64, why string) {
		e.recovery.Dropped = append(e.recovery.Dropped, DroppedEntry{Key: ce.key, Slot: slot, Reason: why})
	}
	e.nextSlot = st.nextSlot
	for i := range st.entries {
		ce := &st.entries[i]
		slot := int64(-1)
		if ce.offset >= base && (ce.offset-base)%e.cfg.SlotBytes == 0 {
			slot = (ce.offset - base) / e.cfg.SlotBytes
		}
		switch {
		case ce.offset < base:
			drop(ce, -1, fmt.Sprintf("offset %d is below data_base %d", ce.offset, base))
			continue
		case slot < 0:
			drop(ce, -1, fmt.Sprintf("offset %d is not slot-aligned", ce.offset))
			continue
		case slot >= e.layout.MaxSlots:
			drop(ce, slot, fmt.Sprintf("slot %d is beyond max_slots %d", slot, e.layout.MaxSlots))
			continue
		case ce.size <= 0 || ce.size > maxPayload:
			drop(ce, slot, fmt.Sprintf("size %d outside (0, %d]", ce.size, maxPayload))
			continue
		case len(ce.key) > 65535:
			drop(ce, slot, "key longer than 65535 bytes")
			continue
		}
		if e.slots[slot].state != stFree {
			drop(ce, slot, "slot already owned by an earlier entry")
			continue
		}
		var k Key
		if ce.hasID {
			k = Key{enc: ce.key, id: ce.id, ns: e.cfg.Namespace}
		} else {
			k, _ = ParseKey(ce.key, e.cfg.Namespace) // an unparseable legacy key keeps identity 0 until verified
		}
		if e.find(k) >= 0 {
			drop(ce, slot, "duplicate key")
			continue
		}
		s := int32(slot)
		r := &e.slots[s]
		r.state = stLive
		r.size = uint32(ce.size)
		r.handle = ce.handle
		if !ce.hasID {
			r.handle = -1
		}
		if ce.hasCRC {
			r.crc = ce.crc
			r.flags |= flHasCRC
		}
		if ce.meta != nil {
			r.flags |= flHasMeta
			e.metas[s] = ce.meta
		}
		e.stamp++
		r.stamp = e.stamp
		e.bind(s, k)
		e.live++
		e.bySalt[k.CacheSalt()] += e.cfg.SlotBytes
		e.byHandle[blockdev.Placement(r.handle)]++
		if slot >= e.nextSlot {
			e.nextSlot = slot + 1 // never hand out a live slot again from next_slot
		}
	}
}

// verifyEntries reads every live slot's header (and payload with VerifyPayloadOnRecover)
// with RecoveryReaders goroutines over contiguous ranges, and drops entries whose header
// has the wrong magic, identity or length, or a checksum that differs from the checkpoint's.
// A cancelled ctx stops the readers within one batch; the error then wraps ctx.Err().
func (e *Engine) verifyEntries(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var live []int32
	for s := int32(0); int64(s) < e.nextSlot; s++ {
		if e.slots[s].state == stLive {
			live = append(live, s)
		}
	}
	total := len(live)
	if total == 0 {
		return nil
	}
	type verdict struct {
		slot   int32
		reason string
		id     uint64 // adopted identity (unknown legacy keys)
		crc    uint32
		hasCRC bool
	}
	workers := min(e.cfg.RecoveryReaders, total)
	results := make([][]verdict, workers)
	var done atomic.Int64
	var progMu sync.Mutex
	report := func() {
		if e.cfg.Progress != nil {
			progMu.Lock()
			e.cfg.Progress(int(done.Load()), total)
			progMu.Unlock()
		}
	}
	const batch = 32
	hb := int64(e.cfg.HeaderBytes)
	hdrRead := e.lbs // the header's first block holds all 32 bytes we need
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*total/workers, (w+1)*total/workers
		wg.Add(1)
		go func(w int, part []int32) {
			defer wg.Done()
			// Staging from the engine's arena where it fits (registered: fixed reads).
			buf, release, err := e.scratch(int(hdrRead) * batch)
			if err != nil {
				for _, s := range part {
					results[w] = append(results[w], verdict{slot: s, reason: "cannot allocate read buffer: " + err.Error()})
				}
				return
			}
			defer release()
			var pbuf []byte
			if e.cfg.VerifyPayloadOnRecover {
				if b, rel, err := e.scratch(int(e.cfg.SlotBytes)); err == nil {
					pbuf = b
					defer rel()
				}
			}
			check := func(s int32, hdr []byte, rerr error) {
				r := &e.slots[s] // read-only here; no other goroutine writes records during recovery
				v := verdict{slot: s}
				if rerr != nil {
					v.reason = "slot header read failed: " + rerr.Error()
					results[w] = append(results[w], v)
					return
				}
				h, err := decodeSlotHeader(hdr[:min(hb, hdrRead)])
				switch {
				case err != nil:
					v.reason = "stale slot header: " + err.Error()
				case r.id == 0 && e.cfg.Namespace == NamespaceLegacy:
					v.id = h.Identity // unparseable legacy key: adopt the header's identity
				case h.Identity != r.id:
					v.reason = fmt.Sprintf("stale slot header: identity %016x, key's is %016x", h.Identity, r.id)
				}
				if v.reason == "" && h.Len != uint64(r.size) {
					v.reason = fmt.Sprintf("stale slot header: payload_len %d, checkpoint size %d", h.Len, r.size)
				}
				if v.reason == "" && h.HasCRC {
					if r.flags&flHasCRC != 0 && r.crc != h.CRC {
						v.reason = fmt.Sprintf("slot rewritten after the checkpoint: header checksum %08x, checkpoint %08x", h.CRC, r.crc)
					} else {
						v.crc, v.hasCRC = h.CRC, true
					}
				}
				if v.reason == "" && pbuf != nil && (v.hasCRC || r.flags&flHasCRC != 0) && ctx.Err() == nil {
					want := r.crc
					if v.hasCRC {
						want = v.crc
					}
					rb := pbuf[:roundUp(int64(r.size), e.lbs)]
					if err := blockdev.ReadAt(e.dev, rb, e.slotOff(s)+hb); err != nil {
						v.reason = "payload read failed: " + err.Error()
					} else if payloadCRC(rb[:r.size]) != want {
						v.reason = "payload checksum mismatch (torn or stale payload)"
					}
				}
				if v.reason != "" || v.id != 0 || v.hasCRC {
					results[w] = append(results[w], v)
				}
			}
			// Small slots: read runs of nearby slots as one sequential extent of up to 1 MiB
			// and pick the headers out (1M slots of 1 KiB: ~1,000 reads instead of 1M).
			var span []byte
			spanSlots := int32(0)
			if e.cfg.SlotBytes <= 64<<10 && e.cfg.SlotBytes*2 <= 1<<20 {
				spanSlots = int32((1 << 20) / e.cfg.SlotBytes)
				var rel func()
				if span, rel, err = e.scratch(int(int64(spanSlots) * e.cfg.SlotBytes)); err != nil {
					spanSlots = 0
				} else {
					defer rel()
				}
			}
			ops := make([]blockdev.Op, 0, batch)
			for len(part) > 0 && ctx.Err() == nil {
				n := 0
				if spanSlots > 0 {
					n = 1
					for n < len(part) && part[n]-part[0] < spanSlots {
						n++
					}
					ln := int64(part[n-1]-part[0])*e.cfg.SlotBytes + hdrRead
					op := []blockdev.Op{{Off: e.slotOff(part[0]), Buf: span[:ln], Handle: blockdev.NoPlacement}}
					_ = e.dev.Submit(op)
					for j := 0; j < n; j++ {
						if op[0].Err != nil { // fall back to this slot's header alone
							hdr := buf[:hdrRead]
							check(part[j], hdr, blockdev.ReadAt(e.dev, hdr, e.slotOff(part[j])))
							continue
						}
						o := int64(part[j]-part[0]) * e.cfg.SlotBytes
						check(part[j], span[o:o+hdrRead], nil)
					}
				} else {
					n = min(batch, len(part))
					ops = ops[:0]
					for j := 0; j < n; j++ {
						ops = append(ops, blockdev.Op{Off: e.slotOff(part[j]), Buf: buf[int64(j)*hdrRead : int64(j+1)*hdrRead], Handle: blockdev.NoPlacement})
					}
					_ = e.dev.Submit(ops)
					for j := 0; j < n; j++ {
						check(part[j], ops[j].Buf, ops[j].Err)
					}
				}
				part = part[n:]
				if done.Add(int64(n))%4096 < int64(n) {
					report()
				}
			}
		}(w, live[lo:hi])
	}
	wg.Wait()
	report()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("recovery stopped after verifying %d of %d entries; nothing was written: %w", done.Load(), total, err)
	}
	for _, rs := range results {
		for _, v := range rs {
			s := v.slot
			r := &e.slots[s]
			if v.reason != "" {
				k := e.keyOf(s)
				e.recovery.Dropped = append(e.recovery.Dropped, DroppedEntry{Key: k.enc, Slot: int64(s), Reason: v.reason})
				e.bySalt[k.CacheSalt()] -= e.cfg.SlotBytes
				if e.bySalt[k.CacheSalt()] <= 0 {
					delete(e.bySalt, k.CacheSalt())
				}
				e.byHandle[blockdev.Placement(r.handle)]--
				if e.byHandle[blockdev.Placement(r.handle)] <= 0 {
					delete(e.byHandle, blockdev.Placement(r.handle))
				}
				e.unbind(s)
				r.state = stFree
				e.live--
				continue
			}
			if v.id != 0 {
				e.tabDelete(s)
				r.id = v.id
				e.tabInsert(s)
			}
			if v.hasCRC {
				r.crc = v.crc
				r.flags |= flHasCRC
			}
		}
	}
	return nil
}

// Detection is what Detect read from a formatted device.
type Detection struct {
	// Config has the layout, namespace and checkpoint format of the checkpoint recovery
	// would choose; other fields are DefaultConfig's.
	Config Config
	// Selection says which container that is and why. Its NamespaceSource is "" when
	// nothing on the device tells the namespace (Config.Namespace is then the default,
	// object): an empty LMCache v1 checkpoint records none.
	Selection Selection
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
			if st, ok := tryContainer(dev, ba, off, size); ok {
				return detectFrom(dev, st, size)
			}
		}
	}
	return Detection{Config: DefaultConfig(), Selection: Selection{Container: -1, Namespace: NamespaceObject}},
		fmt.Errorf("%w: no metadata container with a valid header and CRC found at %d candidate offsets; is the device formatted (rbctl format)?", ErrNoCheckpoint, tried)
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

func detectFrom(dev blockdev.Device, found *ckptState, size int64) (Detection, error) {
	d := Detection{Config: configFrom(found, size), Selection: Selection{Container: -1, Namespace: NamespaceObject}}
	if err := d.Config.validate(); err != nil {
		return d, fmt.Errorf("detected layout is invalid: %w", err)
	}
	lay, err := computeLayout(d.Config, size)
	if err != nil {
		return d, fmt.Errorf("detected layout does not fit the device: %w", err)
	}
	sc := scanContainers(dev, d.Config, lay)
	sel, chosen := selectCheckpoint(dev, lay, &sc)
	d.Selection = sel
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

func tryContainer(dev blockdev.Device, ba, off, size int64) (*ckptState, bool) {
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
	pb, err := blockdev.Alloc(int(roundUp(int64(h.Len), ba)))
	if err != nil {
		return nil, false
	}
	defer blockdev.Free(pb)
	if blockdev.ReadAt(dev, pb, off+ba) != nil || crc32.ChecksumIEEE(pb[:h.Len]) != h.CRC {
		return nil, false
	}
	st, err := decodeCheckpoint(pb[:h.Len])
	if err != nil || st.blockAlign != ba || st.metaMagic != magic {
		return nil, false
	}
	if off != 0 && (st.metaTotal/2/ba)*ba != off {
		return nil, false
	}
	return st, true
}

// layoutDiff names the first layout field where a detected config differs from cfg.
func layoutDiff(got, want Config) error {
	mis := func(field string, g, w any) error {
		return fmt.Errorf("%w: the device was formatted with %s %v but the config has %v; open with --%s %v (or reformat)", ErrLayoutMismatch, field, g, w, flagName(field), g)
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
