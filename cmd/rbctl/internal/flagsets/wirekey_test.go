package flagsets

import "testing"

func TestWireKey(t *testing.T) {
	k := Key{Model: "m", Rank: 3, Hash: "0x01ff", Salt: "s"}
	if err := k.Precheck(); err != nil {
		t.Fatal(err)
	}
	if w := k.Wire(); w.GetModelName() != "m" || w.GetKvRank() != 3 || string(w.GetChunkHash()) != "\x01\xff" || w.GetCacheSalt() != "s" || w.GetEncoded() != "" {
		t.Errorf("wire key %v", w)
	}
	if w := (&Key{Key: "m@0x00000000@aa"}).Wire(); w.GetEncoded() != "m@0x00000000@aa" || w.GetModelName() != "" {
		t.Errorf("encoded wire key %v", w)
	}
}
