package node

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rbctl/rbctl/engine"
)

// TestKeyListMatchesAModel runs random pushes, moves and removals on a keyList and on a
// plain slice (head first) and compares the two orders, both ways, and what the index finds
// for every key, after every step; freed nodes are reused, so a stale link would show as a
// wrong order or a lost key, and a removal that cut a probe run as a key not found. Run
// with 8 keys in a table of 16 cells (never grown: runs wrap around its end) and with 64.
func TestKeyListMatchesAModel(t *testing.T) {
	// Object keys, and legacy keys whose identity is their chunk hash: four workers' keys
	// of one chunk share it, as LMCache's legacy keys of one chunk on different workers do.
	keys := make([]engine.Key, 64)
	for i := range 32 {
		keys[i] = engine.ObjectKey("m", 0, []byte{byte(i)}, "")
		keys[32+i] = engine.LegacyKey(fmt.Sprintf("vllm@m@4@%d@%x", i%4, i/4), uint64(i/4))
	}
	all := keys
	for _, set := range []struct {
		name  string
		keys  []engine.Key
		cells int
	}{{"12 keys in 16 cells", all[26:38], 16}, {"64 keys", all, 0}} {
		t.Run(set.name, func(t *testing.T) {
			keys := set.keys
			rng := rand.New(rand.NewPCG(1, 2))
			l := newKeyList()
			l.reserve(8)
			var model []engine.Key // head first
			at := func(k engine.Key) int {
				return slices.IndexFunc(model, func(m engine.Key) bool { return m.String() == k.String() })
			}
			for step := range 20000 {
				k := keys[rng.IntN(len(keys))]
				i, held := l.find(orderSum(k))
				if held != (at(k) >= 0) {
					t.Fatalf("step %d: find(%s) = %v, the model holds it: %v", step, k, held, at(k) >= 0)
				}
				switch op := rng.IntN(4); {
				case !held && op < 2:
					l.pushFront(k.Identity(), orderSum(k))
					model = slices.Insert(model, 0, k)
				case !held:
					l.pushBack(k.Identity(), orderSum(k))
					model = append(model, k)
				case op < 2:
					l.moveToFront(i)
					model = slices.Delete(model, at(k), at(k)+1)
					model = slices.Insert(model, 0, k)
				default:
					l.remove(i)
					model = slices.Delete(model, at(k), at(k)+1)
				}
				var fwd, back []engine.Key
				byNode := func(i int32) engine.Key { // the model's key of node i's identity and sum
					j := slices.IndexFunc(keys, func(k engine.Key) bool { return k.Identity() == l.ids[i] && orderSum(k) == l.sums[i] })
					if j < 0 {
						t.Fatalf("step %d: node %d holds identity %#x and sum %#x, no key's", step, i, l.ids[i], l.sums[i])
					}
					return keys[j]
				}
				for i := l.head; i != noNode; i = l.next[i] {
					fwd = append(fwd, byNode(i))
				}
				for i := l.tail; i != noNode; i = l.prev[i] {
					back = append(back, byNode(i))
				}
				slices.Reverse(back)
				if !slices.Equal(fwd, model) || !slices.Equal(back, model) || l.len() != len(model) {
					t.Fatalf("step %d: list %v (backwards %v, %d indexed), model %v", step, fwd, back, l.len(), model)
				}
				for _, k := range keys { // the index finds every held key, and no other
					j, ok := l.find(orderSum(k))
					if ok != (at(k) >= 0) || ok && (l.ids[j] != k.Identity() || l.sums[j] != orderSum(k)) {
						t.Fatalf("step %d: find(%s) = node %d, %v; the model holds it: %v", step, k, j, ok, at(k) >= 0)
					}
				}
				if len(l.ids) > len(keys) {
					t.Fatalf("step %d: %d nodes for at most %d keys: freed nodes are not reused", step, len(l.ids), len(keys))
				}
			}
			if set.cells > 0 && len(l.cells) != set.cells {
				t.Fatalf("%d cells, want %d (the table grew: its runs did not wrap as meant)", len(l.cells), set.cells)
			}
		})
	}
}
