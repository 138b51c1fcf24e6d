package engine_test

// Model-based concurrency test: goroutines do random put / load / lookup-lock / unlock /
// delete / async store+load on a small shared key space (more keys than slots, so puts
// also fail for lack of space) while a reference model records every version ever offered
// for a key and every lock each goroutine holds. Run under -race in the normal suite.

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// modelPayload is version ver of key i: the key index and version up front, then a stream.
func modelPayload(i int, ver uint64) []byte {
	n := 16 + int((uint64(i)*2654435761^ver*40503)%uint64(relMax-16))
	p := make([]byte, n)
	binary.LittleEndian.PutUint64(p, uint64(i))
	binary.LittleEndian.PutUint64(p[8:], ver)
	s := ver*0x9e3779b97f4a7c15 + uint64(i) + 1
	for j := 16; j < n; j++ {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		p[j] = byte(s)
	}
	return p
}

// model: versions[i] holds every version ever offered for key i.
type model struct {
	mu       sync.Mutex
	versions []map[uint64]bool
}

func (m *model) offer(i int, v uint64) {
	m.mu.Lock()
	m.versions[i][v] = true
	m.mu.Unlock()
}

// valid reports whether data is exactly some version ever offered for key i.
func (m *model) valid(i int, data []byte) bool {
	if len(data) < 16 || binary.LittleEndian.Uint64(data) != uint64(i) {
		return false
	}
	v := binary.LittleEndian.Uint64(data[8:])
	m.mu.Lock()
	ok := m.versions[i][v]
	m.mu.Unlock()
	return ok && bytes.Equal(data, modelPayload(i, v))
}

func TestConcurrentModel(t *testing.T) {
	const (
		nKeys      = 48
		goroutines = 8
	)
	ops := 300
	if testing.Short() {
		ops = 100
	}
	cfg := relConfig()
	cfg.Periodic = true // checkpoints race with everything else
	cfg.CheckpointInterval = 5e6
	cfg.IdleQuiet = 1e6
	cfg.ForceAfterOps = 40
	mem := blockdev.NewMem(relDevSize(), 0)
	e, err := engine.Format(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{versions: make([]map[uint64]bool, nKeys)}
	for i := range m.versions {
		m.versions[i] = map[uint64]bool{}
	}
	var (
		verCtr                              atomic.Uint64
		wrong, lockBroken, stats            atomic.Int64
		puts, loads, deletes, locks, misses atomic.Int64
		wg                                  sync.WaitGroup
	)
	check := func(i int, buf []byte, size int) {
		if !m.valid(i, buf[:size]) {
			wrong.Add(1)
		}
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			buf := make([]byte, relMax)
			held := map[int]int{} // locks this goroutine holds
			for n := 0; n < ops; n++ {
				i := rng.IntN(nKeys)
				k := relKey(i)
				switch r := rng.IntN(100); {
				case r < 30: // put a fresh version
					v := verCtr.Add(1)
					m.offer(i, v)
					res, _ := e.PutMany([]engine.Key{k}, [][]byte{modelPayload(i, v)})
					if len(res.Stored) == 1 {
						puts.Add(1)
					}
				case r < 55: // load: the bytes must be exactly some version offered for the key
					clear(buf)
					got, _ := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
					if got[0] {
						loads.Add(1)
						check(i, buf, payloadLen(buf))
					} else {
						misses.Add(1)
						if held[i] > 0 {
							lockBroken.Add(1) // a key locked by us cannot have been deleted
						}
					}
				case r < 70: // lookup with lock
					if e.ExistsMany([]engine.Key{k}, true)[0] {
						held[i]++
						locks.Add(1)
					}
				case r < 82: // unlock one held lock
					for j, c := range held {
						e.UnlockMany([]engine.Key{relKey(j)})
						if c == 1 {
							delete(held, j)
						} else {
							held[j] = c - 1
						}
						break
					}
				case r < 96: // non-forced delete: refused while this goroutine holds a lock
					ok := e.DeleteMany([]engine.Key{k}, false)[0]
					if ok {
						deletes.Add(1)
						if held[i] > 0 {
							lockBroken.Add(1)
						}
					}
				default: // async store + load through the task API
					v := verCtr.Add(1)
					m.offer(i, v)
					id := e.SubmitStore([]engine.Key{k}, [][]byte{modelPayload(i, v)})
					if _, err := e.WaitTask(id); err != nil {
						t.Error(err)
						return
					}
					lb := make([]byte, relMax)
					res, err := e.WaitTask(e.SubmitLoad([]engine.Key{k}, [][]byte{lb}))
					if err != nil {
						t.Error(err)
						return
					}
					if res.Results[0] {
						check(i, lb, payloadLen(lb))
					}
				}
				if n%50 == 0 {
					u := e.Usage()
					if u.SlotsUsed+u.SlotsInflight+u.SlotsFree+(u.SlotsTotal-u.NextSlot) != u.SlotsTotal {
						stats.Add(1)
					}
				}
			}
			for j, c := range held {
				for ; c > 0; c-- {
					e.UnlockMany([]engine.Key{relKey(j)})
				}
			}
		}(g)
	}
	wg.Wait()
	t.Logf("%d goroutines × %d ops: %d puts, %d loads (%d misses), %d locks, %d deletes", goroutines, ops, puts.Load(), loads.Load(), misses.Load(), locks.Load(), deletes.Load())
	if wrong.Load() != 0 || lockBroken.Load() != 0 || stats.Load() != 0 {
		t.Fatalf("%d wrong loads, %d lock violations, %d usage mismatches", wrong.Load(), lockBroken.Load(), stats.Load())
	}
	if puts.Load() == 0 || loads.Load() == 0 || deletes.Load() == 0 || locks.Load() == 0 {
		t.Fatal("the mix did not exercise every operation")
	}
	// Quiescent: no lock left, accounting exact, no leak; then a restart serves only valid bytes.
	e.Entries(func(k engine.Key, em engine.EntryMeta) bool {
		if em.Locks != 0 {
			t.Errorf("key %s still has %d locks after every goroutine unlocked", k, em.Locks)
		}
		return true
	})
	checkModelEngine(t, e, m)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := engine.Open(mem.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	checkModelEngine(t, re, m)
}

// payloadLen reads the size of a model payload from its own header (version → size).
func payloadLen(buf []byte) int {
	if len(buf) < 16 {
		return 0
	}
	i, v := binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[8:])
	if i > 1<<20 {
		return 0
	}
	n := 16 + int((i*2654435761^v*40503)%uint64(relMax-16))
	if n > len(buf) {
		return 0
	}
	return n
}

func checkModelEngine(t *testing.T, e *engine.Engine, m *model) {
	t.Helper()
	var keys []engine.Key
	var metas []engine.EntryMeta
	e.Entries(func(k engine.Key, em engine.EntryMeta) bool {
		keys, metas = append(keys, k), append(metas, em)
		return true
	})
	buf := make([]byte, relMax)
	owner := map[uint32]bool{}
	for j, k := range keys {
		if owner[metas[j].Slot] {
			t.Errorf("slot %d owned twice", metas[j].Slot)
		}
		owner[metas[j].Slot] = true
		i, ok := relIndex(k)
		if !ok {
			t.Errorf("foreign key %s", k)
			continue
		}
		got, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
		if !got[0] {
			t.Errorf("indexed key %d does not load: %v", i, err)
			continue
		}
		if !m.valid(i, buf[:metas[j].Size]) {
			t.Errorf("key %d serves bytes that are no version ever stored", i)
		}
	}
	u := e.Usage()
	if u.SlotsUsed != int64(len(keys)) || u.SlotsInflight != 0 || u.SlotsUsed+u.SlotsFree+(u.SlotsTotal-u.NextSlot) != u.SlotsTotal {
		t.Errorf("usage %+v with %d entries", u, len(keys))
	}
}
