package bench

import (
	"errors"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
)

// regMem is a memory device that accepts buffer registration and records it.
type regMem struct {
	*blockdev.Mem
	bufs [][]byte
}

func (r *regMem) RegisterBuffers(bufs [][]byte) error { r.bufs = bufs; return nil }

// The shadow forwards the engine's buffer registration to a device that supports it, and
// reports ErrNotSupported (which the engine does not count as an error) otherwise.
func TestShadowForwardsRegisterBuffers(t *testing.T) {
	const size = 16 << 20
	m, err := ftl.New(ftl.Config{MappingUnit: 4096, LogicalBytes: size, OP: 0.07, RUBytes: 1 << 20, Handles: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.QueueDepth, cfg.Periodic = 64<<10, 1<<20, 8, false

	inner := &regMem{Mem: blockdev.NewMem(size, 4096)}
	e, err := engine.Format(NewShadow(inner, m), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if !st.BuffersRegistered || len(inner.bufs) != 1 || int64(len(inner.bufs[0])) != st.BufferPoolBytes || st.BufferPoolBytes != 8*64<<10 {
		t.Fatalf("registered=%v, inner got %d buffers, pool %d bytes", st.BuffersRegistered, len(inner.bufs), st.BufferPoolBytes)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	m2, _ := ftl.New(ftl.Config{MappingUnit: 4096, LogicalBytes: size, OP: 0.07, RUBytes: 1 << 20, Handles: 2})
	sh := NewShadow(blockdev.NewMem(size, 4096), m2)
	if err := sh.RegisterBuffers([][]byte{make([]byte, 4096)}); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("RegisterBuffers over a plain Mem: %v, want ErrNotSupported", err)
	}
	e2, err := engine.Format(sh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if st := e2.Stats(); st.BuffersRegistered || st.BufferRegisterErrors != 0 {
		t.Fatalf("over a plain Mem: registered=%v errors=%d (%s)", st.BuffersRegistered, st.BufferRegisterErrors, st.BufferRegisterError)
	}
}
