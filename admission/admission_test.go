package admission

import (
	"errors"
	"testing"
)

// TinyLFU refuses a chunk asked for less often than the one it would evict, and admits
// anything while the cache has room.
func TestTinyLFU(t *testing.T) {
	a, err := New("tinylfu", 100)
	if err != nil {
		t.Fatal(err)
	}
	hot, cold := Key{Hash: 1}, Key{Hash: 2}
	for range 5 {
		a.Seen(hot)
	}
	a.Seen(cold)
	if !a.Admit(cold, -1, nil) || a.Admit(cold, -1, &hot) || !a.Admit(hot, -1, &cold) {
		t.Error("tinylfu does not compare frequencies")
	}
}

// second-hit stores a chunk on its second miss, and forgets it after a window of misses.
func TestSecondHit(t *testing.T) {
	a, err := New("second-hit:3", 100)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Hash: 42}
	if a.Admit(k, -1, nil) || !a.Admit(k, -1, nil) {
		t.Fatal("second-hit does not admit on the second miss")
	}
	a.Admit(Key{Hash: 1}, -1, nil)
	a.Admit(Key{Hash: 2}, -1, nil) // third miss of the window: the doorkeeper is cleared
	if a.Admit(k, -1, nil) {
		t.Error("second-hit remembered a chunk past its window")
	}
	if a.NeedsPosition() {
		t.Error("second-hit needs no position")
	}
}

// prefix-depth needs a position; without one (-1) it stores nothing.
func TestDepth(t *testing.T) {
	a, err := New("prefix-depth:2", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !a.NeedsPosition() || !a.Admit(Key{}, 1, nil) || a.Admit(Key{}, 2, nil) || a.Admit(Key{}, -1, nil) {
		t.Error("prefix-depth:2 does not store exactly positions 0 and 1")
	}
}

func TestSpecs(t *testing.T) {
	for _, ok := range []string{"all", "second-hit", "second-hit:1000", "tinylfu", "tinylfu:5", "prefix-depth:8"} {
		if err := Check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if p, _ := New("all", 10); p != nil {
		t.Error("all is not the nil policy")
	}
	for _, bad := range []string{"", "none", "all:3", "prefix-depth", "prefix-depth:0", "second-hit:-1", "tinylfu:x", "tinylfu:2000000000000"} {
		if err := Check(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
