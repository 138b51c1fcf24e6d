package placement

import "testing"

// FuzzParse: any spec either parses into a policy whose decisions stay in range and whose
// Name parses back to itself, or fails with ErrSpec. Never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"none", "static:3", "metadata-class+cache-salt", "cache-salt:rank", "cache_salt_prefix:handles=3/0", "metadata-class+cache_salt_rank:ranks=2:handles=1/0", "cache_salt_rank::", "hotness+", "x+y+z", "metadata-class+cache-salt:pin=Rag=1/=0/a=b=2"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, spec string, handles int) {
		handles %= 300
		p, err := Parse(spec, handles)
		if err != nil {
			return
		}
		for i := range 20 {
			w := Write{CacheSalt: spec[:i%(len(spec)+1)], KVRank: PackKVRank(8, uint32(i), uint32(i%9), uint32(i%11)), Identity: uint64(i), Metadata: i%3 == 0, Size: i}
			Observe(p, w.Identity, Lookup)
			if h := p.Place(w); h != None && (h < 0 || int(h) >= handles) {
				t.Fatalf("%q with %d handles placed on %d", spec, handles, h)
			}
		}
		if q, err := Parse(p.Name(), handles); err != nil || q.Name() != p.Name() {
			t.Fatalf("Name %q does not round-trip: %v", p.Name(), err)
		}
	})
}
