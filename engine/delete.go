package engine

import (
	"github.com/rbctl/rbctl/placement"
)

// DeleteMany. Freed slots go to the deallocator (dealloc.go) with DeallocateOnDelete.

func (e *Engine) deleteMany(keys []Key, force bool) []bool {
	out := make([]bool, len(keys))
	if e.cfg.ReadOnly || e.closed.Load() {
		return out
	}
	kick := false
	e.mu.Lock()
	for i, k := range keys {
		s := e.find(k)
		if s < 0 {
			continue
		}
		r := &e.slots[s]
		switch r.state {
		case stInflight:
			r.flags |= flCanceled
			out[i] = true
		case stLive:
			if r.locks > 0 && !force {
				e.st.deletesRefused.Add(1)
				continue
			}
			e.bySalt[k.CacheSalt()] -= e.cfg.SlotBytes
			if e.bySalt[k.CacheSalt()] <= 0 {
				delete(e.bySalt, k.CacheSalt())
			}
			e.byHandle[placement.Handle(r.handle)]--
			if e.byHandle[placement.Handle(r.handle)] <= 0 {
				delete(e.byHandle, placement.Handle(r.handle))
			}
			e.unbind(s)
			e.live--
			e.markDirty(s)
			if e.releaseSlot(s) {
				kick = true
			}
			out[i] = true
			e.st.deletes.Add(1)
		}
	}
	e.mu.Unlock()
	if kick {
		e.kickDealloc()
	}
	e.observe(keys, out, placement.Delete)
	return out
}
