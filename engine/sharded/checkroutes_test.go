package sharded

import (
	"fmt"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// One shard of a two-shard cache, opened alone, is told from a cache of its own.
func TestCheckRoutesTellsALoneShard(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 8192, 1<<20, false
	mk := func() *engine.Engine {
		e, err := engine.Format(blockdev.NewMem(1<<20+256*8192, 512), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	two, err := New([]*engine.Engine{mk(), mk()}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	own, _ := New([]*engine.Engine{mk()}, Config{})
	for i := range 100 {
		k := engine.ObjectKey("m", 0, []byte(fmt.Sprintf("h%03d", i)), "")
		for _, c := range []*Cache{two, own} {
			if _, err := c.PutMany([]engine.Key{k}, [][]byte{[]byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := two.CheckRoutes(); err != nil {
		t.Fatalf("the two shards in order: %v", err)
	}
	if err := own.CheckRoutes(); err != nil {
		t.Fatalf("a cache of its own: %v", err)
	}
	alone, _ := New([]*engine.Engine{two.Shard(1)}, Config{})
	if err := alone.CheckRoutes(); err == nil {
		t.Fatal("shard 1 of 2 alone was not refused")
	} else {
		t.Log(err)
	}
	swapped, _ := New([]*engine.Engine{two.Shard(1), two.Shard(0)}, Config{})
	if err := swapped.CheckRoutes(); err == nil {
		t.Fatal("the shards out of order were not refused")
	}
}
