package sharded

import (
	"fmt"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// UsageByShard returns each shard's slot occupancy.
func (c *Cache) UsageByShard() []engine.Usage {
	out := make([]engine.Usage, len(c.shards))
	for i, e := range c.shards {
		out[i] = e.Usage()
	}
	return out
}

// Usage is the occupancy of every shard summed (Fraction over the total; NextSlot is the
// sum of the shards' never-used boundaries).
func (c *Cache) Usage() engine.Usage {
	return SumUsage(c.UsageByShard())
}

// SumUsage adds per-shard usages.
func SumUsage(us []engine.Usage) engine.Usage {
	t := engine.Usage{BytesBySalt: map[string]int64{}, SlotsByHandle: map[placement.Handle]int64{}}
	for _, u := range us {
		t.SlotsTotal += u.SlotsTotal
		t.SlotsUsed += u.SlotsUsed
		t.SlotsInflight += u.SlotsInflight
		t.SlotsFree += u.SlotsFree
		t.SlotsPending += u.SlotsPending
		t.NextSlot += u.NextSlot
		for k, v := range u.BytesBySalt {
			t.BytesBySalt[k] += v
		}
		for k, v := range u.SlotsByHandle {
			t.SlotsByHandle[k] += v
		}
	}
	if t.SlotsTotal > 0 {
		t.Fraction = float64(t.SlotsUsed+t.SlotsInflight) / float64(t.SlotsTotal)
	}
	return t
}

// StatsByShard returns each shard's counters (Recovery is that shard's report).
func (c *Cache) StatsByShard() []engine.Stats {
	out := make([]engine.Stats, len(c.shards))
	for i, e := range c.shards {
		out[i] = e.Stats()
	}
	return out
}

// Stats is every shard's counters summed.
func (c *Cache) Stats() engine.Stats { return SumStats(c.StatsByShard()) }

// SumStats adds per-shard counters: counts and bytes are summed, durations and the
// checkpoint sequence are the largest, the buffers are registered only when every shard's
// are, the last errors are the first shard's that has one (prefixed with its index), and
// Recovery is left zero (Cache.Recovery has one report per shard).
func SumStats(ss []engine.Stats) engine.Stats {
	var t engine.Stats
	t.BuffersRegistered = len(ss) > 0
	for i, s := range ss {
		t.Puts += s.Puts
		t.PutBytes += s.PutBytes
		t.PutSkipped += s.PutSkipped
		t.PutFailed += s.PutFailed
		t.Loads += s.Loads
		t.LoadBytes += s.LoadBytes
		t.LoadMisses += s.LoadMisses
		t.ChecksumErrors += s.ChecksumErrors
		t.Deletes += s.Deletes
		t.DeletesRefused += s.DeletesRefused
		t.Lookups += s.Lookups
		t.LookupHits += s.LookupHits
		t.Checkpoints += s.Checkpoints
		t.CheckpointsForced += s.CheckpointsForced
		t.CheckpointErrors += s.CheckpointErrors
		t.CheckpointBytes += s.CheckpointBytes
		t.CheckpointEntries += s.CheckpointEntries
		t.CheckpointSeq = max(t.CheckpointSeq, s.CheckpointSeq)
		t.MaxLockHold = max(t.MaxLockHold, s.MaxLockHold)
		t.MaxLockHoldCPU = max(t.MaxLockHoldCPU, s.MaxLockHoldCPU)
		t.LastCheckpointTime = max(t.LastCheckpointTime, s.LastCheckpointTime)
		t.DirtyOps += s.DirtyOps
		t.PutsRefusedCheckpoint += s.PutsRefusedCheckpoint
		t.CheckpointFailingFor = max(t.CheckpointFailingFor, s.CheckpointFailingFor)
		t.Room.BudgetBytes += s.Room.BudgetBytes
		t.Room.UsedBytes += s.Room.UsedBytes
		t.Room.SpareBytes += s.Room.SpareBytes
		t.Room.Refused += s.Room.Refused
		t.Room.PerSlotBytes = max(t.Room.PerSlotBytes, s.Room.PerSlotBytes)
		t.AffinityHits += s.AffinityHits
		t.AffinityFallbacks += s.AffinityFallbacks
		t.GroupFallbacks += s.GroupFallbacks
		t.DeallocatedSlots += s.DeallocatedSlots
		t.DeallocateErrors += s.DeallocateErrors
		t.DeallocateCalls += s.DeallocateCalls
		t.DeallocateRanges += s.DeallocateRanges
		if t.LastCheckpointError == "" && s.LastCheckpointError != "" {
			t.LastCheckpointError = fmt.Sprintf("shard %d: %s", i, s.LastCheckpointError)
		}
		t.BufferPoolBytes += s.BufferPoolBytes
		t.BuffersRegistered = t.BuffersRegistered && s.BuffersRegistered
		t.BufferRegisterErrors += s.BufferRegisterErrors
		if t.BufferRegisterError == "" && s.BufferRegisterError != "" {
			t.BufferRegisterError = fmt.Sprintf("shard %d: %s", i, s.BufferRegisterError)
		}
		t.BufferPoolMisses += s.BufferPoolMisses
		t.RegisteredMemory += s.RegisteredMemory // one buffer on N devices counts N times
		t.PutsVectored += s.PutsVectored
	}
	return t
}
