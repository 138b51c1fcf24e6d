package workloads

import "sync"

// mapBackend is a Backend over a map, for driver tests without an FTL or engine.
type mapBackend struct {
	mu     sync.Mutex
	slots  int64
	keys   map[Key]bool
	stores int64
	dels   int64
	maxRes int
}

func newMapBackend(slots int64) *mapBackend { return &mapBackend{slots: slots, keys: map[Key]bool{}} }

func (b *mapBackend) Slots() int64 { return b.slots }
func (b *mapBackend) Lookup(ks []Key) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range ks {
		if !b.keys[k] {
			break
		}
		n++
	}
	return n, nil
}
func (b *mapBackend) Load(ks []Key, size int) (int, error) { return len(ks), nil }
func (b *mapBackend) Unlock([]Key)                         {}
func (b *mapBackend) Store(ks []Key, size int, ok []bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, k := range ks {
		if int64(len(b.keys)) >= b.slots {
			ok[i] = false
			continue
		}
		b.keys[k] = true
		b.stores++
		ok[i] = true
	}
	b.maxRes = max(b.maxRes, len(b.keys))
	return nil
}
func (b *mapBackend) Delete(ks []Key) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range ks {
		if b.keys[k] {
			delete(b.keys, k)
			b.dels++
		}
	}
	return nil
}
