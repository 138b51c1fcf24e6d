package node

import (
	"sync"
	"sync/atomic"

	"github.com/rbctl/rbctl/engine"
)

// Checkpoint health. A node's acknowledged writes survive a crash only through checkpoints
// (docs/p2p.md, "Crash contract"), so a failing checkpoint is logged at once and at every
// retry, shown as unhealthy in Stats (healthy 0, checkpoint_failing_seconds), /metrics and
// RESP INFO, and once it has failed for longer than the crash window the engine refuses
// puts (engine.ErrCheckpointFailing) until one succeeds again.
type ckptHealth struct {
	mu      sync.Mutex
	failing map[int]int // shard → consecutive failed attempts
	fails   atomic.Int64
}

// watchCheckpoints registers the logger on every shard's engine.
func (n *Node) watchCheckpoints() {
	n.health.failing = map[int]int{}
	for i := range n.cache.Len() {
		n.cache.Shard(i).NotifyCheckpoint(func(err error) { n.checkpointed(i, err) })
	}
}

func (n *Node) unwatchCheckpoints() {
	for i := range n.cache.Len() {
		n.cache.Shard(i).NotifyCheckpoint(nil)
	}
}

func (n *Node) checkpointed(shard int, err error) {
	h := &n.health
	h.mu.Lock()
	prev := h.failing[shard]
	if err != nil {
		h.failing[shard] = prev + 1
	} else {
		delete(h.failing, shard)
	}
	h.mu.Unlock()
	switch {
	case err != nil:
		h.fails.Add(1)
		n.opts.Logger.Error("checkpoint failed: acknowledged writes since the last checkpoint are not yet crash-safe",
			"device", shard, "attempt", prev+1, "err", err,
			"effect", "writes are refused once this has lasted longer than the crash window (checkpoint interval + force-after)")
	case prev > 0:
		n.opts.Logger.Info("checkpoint written again", "device", shard, "after_failures", prev)
	}
}

// healthStats adds healthy (1 when the last checkpoint attempt of every device succeeded)
// and the refusal counters.
func (n *Node) healthStats(m map[string]int64, s engine.Stats) {
	m["healthy"] = 1
	if s.LastCheckpointError != "" && s.DirtyOps > 0 {
		m["healthy"] = 0
	}
	m["checkpoint_failing_seconds"] = int64(s.CheckpointFailingFor.Seconds())
	m["puts_refused_checkpoint"] = s.PutsRefusedCheckpoint
	m["index_room_refused"] = s.Room.Refused
	m["index_room_spare_bytes"] = s.Room.SpareBytes
}
