package ftl

import "testing"

// The flag types parse themselves as text (encoding.TextUnmarshaler), as their Parse
// functions do, and keep their value on an unknown name.
func TestUnmarshalText(t *testing.T) {
	var i Isolation
	var g GCPolicy
	p := Sequential
	if i.UnmarshalText([]byte("pi")) != nil || i != PersistentlyIsolated || g.UnmarshalText([]byte("cost-benefit")) != nil || g != CostBenefit ||
		p.UnmarshalText([]byte("trim")) != nil || p != Fresh {
		t.Fatalf("parsed %v %v %v", i, g, p)
	}
	if i.UnmarshalText([]byte("x")) == nil || i != PersistentlyIsolated || g.UnmarshalText([]byte("lru")) == nil || p.UnmarshalText([]byte("full")) == nil || p != Fresh {
		t.Errorf("unknown names: %v %v %v", i, g, p)
	}
}
