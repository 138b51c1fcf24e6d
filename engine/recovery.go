package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/rbctl/rbctl/blockdev"
)

// scanned is one metadata container as read from the device.
type scanned struct {
	info    ContainerInfo
	hdrOK   bool       // the header decoded: its seq and payload_len mean something
	damaged bool       // the header or payload is corrupt (ErrCorrupt), not merely empty or unreadable
	payload []byte     // the payload read: CRC-checked when info.Valid, else kept to count what is lost
	decoded *ckptState // payload decoded already (detect's first container), or nil
	seal    sealState  // rbctl's header seal (checkpoint.go)
	sealSeq uint64
}

// scanContainers reads both container headers and, for those whose header is sound, the
// payload, checking its CRC. It never writes.
func scanContainers(dev blockdev.Device, cfg Config, lay Layout) [2]scanned {
	return scanContainersKnowing(dev, cfg, lay, nil)
}

// scanContainersKnowing is scanContainers taking the payload of the container detect
// found (f, when not nil) instead of reading it again, when its header still gives it the
// same length and CRC.
func scanContainersKnowing(dev blockdev.Device, cfg Config, lay Layout, f *found) [2]scanned {
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
				sc.damaged = errors.Is(err, ErrCorrupt)
			}
			continue
		}
		sc.hdrOK = true
		if f != nil && f.off == ci.Offset && f.len == h.Len && f.crc == h.CRC {
			sc.payload, sc.decoded, ci.ComputedCRC = f.payload, f.st, f.crc // f's CRC was computed over these bytes
		} else {
			p, err := readPayload(dev, ci.Offset+ba, int64(h.Len), ba)
			if err != nil {
				ci.Problem = err.Error()
				continue
			}
			sc.payload, ci.ComputedCRC = p, crc32.ChecksumIEEE(p)
		}
		p := sc.payload
		if ci.ComputedCRC != h.CRC {
			ci.Problem = fmt.Sprintf("%v: header CRC %08x, payload CRC %08x", ErrChecksum, h.CRC, ci.ComputedCRC)
			sc.damaged = true
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

// readPayload reads the n-byte container payload at off. A payload of tens of MiB is read
// straight into the Go slice kept (a large Go allocation starts on a page, and so on a
// block_align boundary); a small or misaligned one through an aligned buffer and a copy.
func readPayload(dev blockdev.Device, off, n, ba int64) ([]byte, error) {
	if p := make([]byte, roundUp(n, ba)); blockdev.Aligned(p, int(ba)) {
		if err := blockdev.ReadAt(dev, p, off); err != nil {
			return nil, fmt.Errorf("payload read error: %w", err)
		}
		return p[:n:n], nil
	}
	pb, err := blockdev.Alloc(int(roundUp(n, ba)))
	if err != nil {
		return nil, err
	}
	defer blockdev.Free(pb)
	if err := blockdev.ReadAt(dev, pb, off); err != nil {
		return nil, fmt.Errorf("payload read error: %w", err)
	}
	return append([]byte(nil), pb[:n]...), nil
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
		return fieldErr(ErrLayoutMismatch, []string{field}, "%s is %v on the device but %v in the config; open with %s %v (or reformat)", field, got, want, field, got)
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
		return fieldErr(ErrLayoutMismatch, []string{"capacity_bytes"}, "next_slot %d outside [0, %d] (max_slots); the checkpoint belongs to a larger device or capacity_bytes", st.nextSlot, e.layout.MaxSlots)
	}
	return nil
}

// OpenOptions are Open's choices that are about one recovery rather than the cache.
type OpenOptions struct {
	// Context, when set, stops the slot verification of recovery: Open then returns an
	// error wrapping ctx.Err() and has written nothing.
	Context context.Context
	// AcceptDoubt opens for writing even when checkpoint selection is in doubt
	// (Selection.Doubt); the next checkpoint then replaces the rejected container.
	AcceptDoubt bool
	// Scan rebuilds the index from the slot headers' key records (scan.go) when neither
	// container holds a usable checkpoint, instead of failing with ErrNoCheckpoint; the
	// next checkpoint (RepairCheckpoints: both) then replaces the damaged containers.
	Scan bool
	// ScanLayout says where the config's layout came from (Detection.LayoutSource), for
	// the report.
	ScanLayout string
	// Detected, when it is what Detect returned for this device (and nothing has written
	// to the device since), saves Open reading, checking and decoding both checkpoints
	// again: Open uses the containers Detect read and the checkpoint it chose when cfg has
	// the layout and container header fields they were read with, and reads them itself
	// otherwise. One Open uses a Detection's checkpoint; a second one reads its own.
	Detected *Detection
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
	if !cfg.ReadOnly {
		if err := e.allocateMetadata(); err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
	}
	start := time.Now()
	var sc [2]scanned
	var sel Selection
	var st *ckptState
	if r := opts.Detected.reuse(dev, cfg, e.layout); r != nil {
		sc, sel, st = r.sc, r.sel, r.st
		r.sc, r.st = [2]scanned{}, nil // the engine's now: the payloads are not kept twice
	} else {
		sc = scanContainers(dev, cfg, e.layout)
		sel, st = selectCheckpoint(dev, e.layout, &sc)
	}
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
	if st == nil && opts.Scan {
		e.recovery.Container, e.recovery.Format = -1, cfg.CheckpointFormat
		if err := e.scanSlots(opts.Context, opts.ScanLayout); err != nil {
			return nil, err
		}
		e.recovery.Verified = true
	} else if st == nil {
		if !sc[0].info.Valid && !sc[1].info.Valid && sel.Candidates[0].Entries < 0 && sel.Candidates[1].Entries < 0 {
			if dc, derr := detectConfig(dev); derr == nil {
				if err := layoutDiff(dc, cfg); err != nil {
					return nil, err
				}
			}
		}
		why := "the device is not formatted, or was formatted with another meta_total_bytes, block_align or meta_magic"
		if sc[0].damaged || sc[1].damaged {
			return nil, fmt.Errorf("%w on the device (%w): container 0: %s; container 1: %s (the checkpoints are damaged; the key records in the slot headers can rebuild the index)",
				ErrNoCheckpoint, ErrCorrupt, sc[0].info.Problem, sc[1].info.Problem)
		}
		return nil, fmt.Errorf("%w on the device: container 0: %s; container 1: %s (%s)",
			ErrNoCheckpoint, sc[0].info.Problem, sc[1].info.Problem, why)
	} else if err := e.applyCheckpoint(st, sel, opts); err != nil {
		return nil, err
	}
	e.rebuildFree()
	e.recovery.Kept = int(e.live)
	e.recovery.FreeSlots = e.alloc.nfree
	e.recovery.NextSlot = e.alloc.nextSlot
	e.recovery.Duration = time.Since(start)
	if (len(e.recovery.Dropped) > 0 || len(e.recovery.Rescued) > 0 || e.recovery.Scan != nil) && !cfg.ReadOnly {
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
	if c := e.recovery.Selection.Container; e.recovery.Scan != nil || (c >= 0 && e.recovery.Selection.Candidates[c].Damaged()) {
		return e.writeCheckpoint(true, true) // after a scan: a fresh pair, no damaged container left
	}
	return nil
}

// applyCheckpoint applies the chosen checkpoint st: layout checks, its entries, and (with
// VerifyOnLoad) the verification of their slot headers.
func (e *Engine) applyCheckpoint(st *ckptState, sel Selection, opts OpenOptions) error {
	cfg := e.cfg
	if sel.Doubt && !cfg.ReadOnly && !opts.AcceptDoubt {
		return fmt.Errorf("%w: %s", ErrSelectionDoubt, sel.Reason)
	}
	e.recovery.Container, e.recovery.Seq, e.recovery.Format = sel.Container, sel.Seq, st.format
	if err := e.checkLayout(st); err != nil {
		return err
	}
	if !st.hasNS && sel.NamespaceSource == "slot headers" && sel.Namespace != cfg.Namespace {
		return fieldErr(ErrLayoutMismatch, []string{"namespace"}, "the slot headers of the checkpoint's entries carry %s-namespace identities but the config has namespace %s; open it with namespace %s", sel.Namespace, cfg.Namespace, sel.Namespace)
	}
	if e.cfg.DevicePath == "" && st.hasDevPath {
		e.cfg.DevicePath = st.devicePath
	}
	var pre *headerPrefetch
	if cfg.VerifyOnLoad { // the headers are read while the entries are applied
		pre = e.startPrefetch(opts.Context, st.count(), st.nextSlot)
	}
	e.applyState(st)
	if cfg.VerifyOnLoad && sel.rejected != nil {
		e.applyRescue(sel.rejected)
	}
	if cfg.VerifyOnLoad {
		if err := e.verifyEntries(opts.Context, pre); err != nil {
			return err
		}
		e.recovery.Verified = true
	}
	e.rescued()
	return nil
}
