package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Rebuilding the index from the slots when no checkpoint is usable (OpenOptions.Scan):
// every slot header's key record (headers.go) names the key, its payload length, checksum
// and put generation. Deleted slots keep their headers (format.md), so a scan brings back
// keys deleted since the last checkpoint unless their slots were deallocated: it is the
// rescue when the checkpoints are lost, never the normal recovery.

// ScanReport is what a rebuild from the slot headers found.
type ScanReport struct {
	Slots      int64 // slots read (max_slots)
	Empty      int64 // slots with no slot header: never written, or deallocated
	NoKey      int64 // slot headers without a key record (written by LMCache, by rbctl before key records, or a key too long for the header)
	Failed     int   // slots whose header or payload failed verification (in RecoveryReport.Dropped)
	Superseded int   // older versions of a key whose later generation another slot holds
	Rebuilt    int   // entries of the rebuilt index
	// LayoutSource is where the layout came from (OpenOptions.ScanLayout, DetectScan).
	LayoutSource string
}

// nextGen returns the generation of a put: the clock in nanoseconds, strictly above every
// generation this engine gave or found, so that of two slots holding one key the later put
// wins a scan (unless the clock stepped back between two processes).
func (e *Engine) nextGen() uint64 {
	now := uint64(e.now().UnixNano()) // Config.Now: tests fix it
	for {
		last := e.gen.Load()
		g := max(now, last+1)
		if e.gen.CompareAndSwap(last, g) {
			return g
		}
	}
}

// scanned slot: a verified key record.
type scanFound struct {
	slot int32
	key  Key
	size uint32
	crc  uint32
	gen  uint64
}

// scanSlots reads every slot's header (and the payload of each one with a key record),
// verifies key record, identity, length and payload checksum, keeps the latest generation
// of each key and applies the result as a checkpoint would be applied. A cancelled ctx
// stops it within one batch; the error then wraps ctx.Err() and nothing was changed.
func (e *Engine) scanSlots(ctx context.Context, layoutSource string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	total := e.layout.MaxSlots
	rep := &ScanReport{Slots: total, LayoutSource: layoutSource}
	hb := int64(e.cfg.HeaderBytes)
	maxPayload := e.layout.PayloadBytes()
	legacy := e.cfg.Namespace == NamespaceLegacy
	workers := int(min(int64(e.cfg.RecoveryReaders), total))
	type part struct {
		found   []scanFound
		dropped []DroppedEntry
		empty   int64
		noKey   int64
		maxGen  uint64
	}
	parts := make([]part, workers)
	var done atomic.Int64
	var progMu sync.Mutex
	report := func() {
		if e.cfg.Progress != nil {
			progMu.Lock()
			e.cfg.Progress(int(done.Load()), int(total))
			progMu.Unlock()
		}
	}
	const batch = 32
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := int64(w)*total/int64(workers), int64(w+1)*total/int64(workers)
		wg.Add(1)
		go func(p *part) {
			defer wg.Done()
			drop := func(s int64, key, why string) {
				p.dropped = append(p.dropped, DroppedEntry{Key: key, Slot: s, Reason: why})
			}
			hbuf, relH, err := e.scratch(int(hb) * batch)
			var pbuf []byte
			if err == nil {
				var relP func()
				if pbuf, relP, err = e.scratch(int(max(roundUp(maxPayload, e.lbs), 4<<20))); err == nil {
					defer relP()
				}
				defer relH()
			}
			if err != nil {
				for s := lo; s < hi; s++ {
					drop(s, "", "cannot allocate read buffer: "+err.Error())
				}
				return
			}
			type pending struct {
				slot int64
				h    slotHeader
				k    Key
			}
			var pend []pending
			var pops []blockdev.Op
			// verify reads the payloads of pend, as many per Submit as pbuf holds, and checks
			// their CRCs.
			verify := func() {
				for len(pend) > 0 {
					pops = pops[:0]
					used := int64(0)
					for _, c := range pend {
						n := roundUp(int64(c.h.Len), e.lbs)
						if used+n > int64(len(pbuf)) {
							break
						}
						pops = append(pops, blockdev.Op{Off: e.slotOff(int32(c.slot)) + hb, Buf: pbuf[used : used+n], Handle: placement.None})
						used += n
					}
					_ = e.dev.Submit(pops)
					for i, op := range pops {
						c := &pend[i]
						switch {
						case op.Err != nil:
							drop(c.slot, c.h.Key, "payload read failed: "+op.Err.Error())
						case coldCRC(op.Buf[:c.h.Len]) != c.h.CRC:
							drop(c.slot, c.h.Key, "payload checksum mismatch (torn or overwritten payload)")
						default:
							p.found = append(p.found, scanFound{slot: int32(c.slot), key: c.k, size: uint32(c.h.Len), crc: c.h.CRC, gen: c.h.Gen})
							p.maxGen = max(p.maxGen, c.h.Gen)
						}
					}
					pend = pend[len(pops):]
				}
			}
			ops := make([]blockdev.Op, 0, batch)
			for s0 := lo; s0 < hi && ctx.Err() == nil; s0 += batch {
				n := min(int64(batch), hi-s0)
				ops = ops[:0]
				for j := int64(0); j < n; j++ {
					ops = append(ops, blockdev.Op{Off: e.slotOff(int32(s0 + j)), Buf: hbuf[j*hb : (j+1)*hb], Handle: placement.None})
				}
				_ = e.dev.Submit(ops)
				for j := range ops {
					s := s0 + int64(j)
					if ops[j].Err != nil {
						drop(s, "", "slot header read failed: "+ops[j].Err.Error())
						continue
					}
					hdr := ops[j].Buf
					h, err := decodeSlotHeader(hdr)
					if err != nil {
						p.empty++ // no magic: never written or deallocated (LMCache semantics: not a slot)
						continue
					}
					switch keyRecordState(hdr) {
					case 0:
						p.noKey++
						continue
					case -1:
						drop(s, "", "key record damaged (its CRC-32C does not match, or it has unknown flags)")
						continue
					}
					k, why := e.scanKey(h, legacy)
					if why == "" && (h.Len == 0 || int64(h.Len) > maxPayload) {
						why = fmt.Sprintf("payload_len %d outside (0, %d]", h.Len, maxPayload)
					}
					if why != "" {
						drop(s, h.Key, why)
						continue
					}
					pend = append(pend, pending{s, h, k})
				}
				verify()
				if done.Add(n)%4096 < n {
					report()
				}
			}
		}(&parts[w])
	}
	wg.Wait()
	report()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scan stopped after %d of %d slots; nothing was written: %w", done.Load(), total, err)
	}
	var found []scanFound
	var maxGen uint64
	for i := range parts {
		p := &parts[i]
		found = append(found, p.found...)
		e.recovery.Dropped = append(e.recovery.Dropped, p.dropped...)
		rep.Empty += p.empty
		rep.NoKey += p.noKey
		rep.Failed += len(p.dropped)
		maxGen = max(maxGen, p.maxGen)
	}
	// One slot per key: the latest generation, then the higher slot.
	sort.Slice(found, func(i, j int) bool {
		a, b := &found[i], &found[j]
		if a.key.enc != b.key.enc {
			return a.key.enc < b.key.enc
		}
		if a.gen != b.gen {
			return a.gen > b.gen
		}
		return a.slot > b.slot
	})
	keep := found[:0]
	for i := range found {
		if i > 0 && found[i].key.enc == found[i-1].key.enc {
			rep.Superseded++
			continue
		}
		keep = append(keep, found[i])
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].slot < keep[j].slot })
	st := &ckptState{format: e.cfg.CheckpointFormat, version: 1, entries: make([]ckptEntry, len(keep))}
	for i, f := range keep {
		st.entries[i] = ckptEntry{key: f.key.enc, id: f.key.id, hasID: true, offset: e.slotOff(f.slot), size: int64(f.size),
			crc: f.crc, hasCRC: true, handle: -1}
		st.nextSlot = int64(f.slot) + 1
	}
	e.applyState(st)
	rep.Rebuilt = int(e.live)
	e.recovery.Scan = rep
	for {
		if last := e.gen.Load(); last >= maxGen || e.gen.CompareAndSwap(last, maxGen) {
			break
		}
	}
	return nil
}

// scanKey checks a key record against its header: namespace and identity. It returns the
// key, or why the slot is not taken.
func (e *Engine) scanKey(h slotHeader, legacy bool) (Key, string) {
	if h.Legacy != legacy {
		ns := map[bool]Namespace{false: NamespaceObject, true: NamespaceLegacy}
		return Key{}, fmt.Sprintf("key record is in the %s namespace, the cache's is %s", ns[h.Legacy], ns[legacy])
	}
	if err := keyText(h.Key); err != nil {
		return Key{}, "key record holds a key no writer stores: " + err.Error()
	}
	k, err := ParseKey(h.Key, e.cfg.Namespace)
	switch {
	case err != nil && legacy:
		k = Key{enc: h.Key, id: h.Identity, ns: NamespaceLegacy} // no readable chunk hash: adopt the header's
	case err != nil:
		return Key{}, "key record holds an invalid key: " + err.Error()
	case k.id != h.Identity:
		return Key{}, fmt.Sprintf("identity %016x, the key's is %016x", h.Identity, k.id)
	}
	return k, ""
}
