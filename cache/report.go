package cache

// What the engine reports, as the plain structs of reports/cachereport that inspect,
// recover, format and ls print (that package imports no engine).

import (
	"fmt"
	"sort"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// ChoiceOf describes the checkpoint choice sel; the lost-key sample is escaped.
func ChoiceOf(sel engine.Selection) cachereport.Choice {
	j := cachereport.Choice{Container: sel.Container, Seq: sel.Seq, Reason: sel.Reason, Doubt: sel.Doubt, Fallback: sel.Fallback,
		LostKnown: sel.LostKnown, MixedFormats: sel.MixedFormats, Namespace: string(sel.Namespace), NamespaceSource: sel.NamespaceSource}
	if sel.Fallback && sel.LostKnown {
		n := sel.Lost
		j.LostKeys = &n
	}
	for _, k := range sel.LostSample {
		j.LostSample = append(j.LostSample, reports.Escape(k))
	}
	for _, c := range sel.Candidates {
		cd := cachereport.Candidate{Container: c.Container, Usable: c.Usable, HeaderSeq: c.HeaderSeq, Seq: c.Seq,
			SeqSource: c.SeqSource, SeqNote: c.SeqNote, Format: string(c.Format), Namespace: string(c.Namespace), Problem: c.Problem}
		if c.Entries >= 0 { // -1: the payload does not decode, so neither it nor next_slot is known
			cd.Entries, cd.NextSlot = new(c.Entries), new(c.NextSlot)
		}
		if c.Stale >= 0 {
			cd.Stale = new(c.Stale)
		}
		j.Candidates = append(j.Candidates, cd)
	}
	return j
}

// LayoutOf describes the layout l of a cache configured by cfg.
func LayoutOf(l engine.Layout, cfg engine.Config) cachereport.Layout {
	return cachereport.Layout{DeviceSize: l.DeviceSize, CapacityBytes: l.Capacity, BlockAlign: l.BlockAlign, HeaderBytes: l.HeaderBytes,
		SlotBytes: l.SlotBytes, MetaTotalBytes: l.MetaTotalBytes, ContainerBytes: l.ContainerBytes, PayloadCapacity: l.PayloadCap,
		DataBaseOffset: l.DataBase, MaxSlots: l.MaxSlots, MetaMagic: cfg.MetaMagic, MetaVersion: cfg.MetaVersion,
		Namespace: string(cfg.Namespace), CheckpointFormat: string(cfg.CheckpointFormat), Container1Offset: l.ContainerOffset[1]}
}

// Keys lists the entries of e (only those with cache_salt salt, when salt is not ""),
// sorted by key; never nil.
func Keys(e *engine.Engine, salt string) []cachereport.Key {
	keys := []cachereport.Key{}
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		if salt != "" && k.CacheSalt() != salt {
			return true
		}
		ik := cachereport.Key{Key: k.String(), Slot: m.Slot, Offset: m.Offset, Size: m.Size, Salt: k.CacheSalt(), Handle: int32(m.Handle)}
		if m.HasChecksum {
			ik.CRC = fmt.Sprintf("%08x", m.Checksum)
		}
		keys = append(keys, ik)
		return true
	})
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	return keys
}

func droppedOf(ds []engine.DroppedEntry) []cachereport.Dropped {
	out := make([]cachereport.Dropped, len(ds))
	for i, d := range ds {
		out[i] = cachereport.Dropped(d)
	}
	return out
}

func scanOf(s *engine.ScanReport) *cachereport.Scan {
	if s == nil {
		return nil
	}
	return &cachereport.Scan{LayoutSource: s.LayoutSource, Slots: s.Slots, Rebuilt: s.Rebuilt, Superseded: s.Superseded, Failed: s.Failed,
		NoKeyRecord: s.NoKey, Empty: s.Empty}
}
