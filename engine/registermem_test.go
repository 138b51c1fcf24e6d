package engine_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// RegisterMemory: the caller's aligned buffers join the engine's arena as fixed buffers, so
// direct loads into them go out as READ_FIXED; replacing or dropping the set changes only
// which loads are fixed, never what they read.
func TestRegisterMemory(t *testing.T) {
	for _, noArena := range []bool{false, true} {
		name := "with-arena"
		if noArena {
			name = "no-arena-registration"
		}
		t.Run(name, func(t *testing.T) {
			const n = 12
			dev := openUringFile(t, filepath.Join(t.TempDir(), "reg.img"), 1<<20+32*fixedSlot)
			cfg := fixedConfig()
			cfg.NoRegisterBuffers = noArena
			e, err := engine.Format(dev, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pool, err := blockdev.Alloc(n * fixedSlot)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				e.Close() // the rings release the registration before the memory goes
				blockdev.Free(pool)
			}()
			bufs := make([][]byte, n)
			for i := range bufs {
				bufs[i] = pool[i*fixedSlot : (i+1)*fixedSlot]
			}
			keys, pay := fixedKeys(n + 1)
			extraKey, extraPay := keys[n:], pay[n:]
			keys, pay = keys[:n], pay[:n]
			if _, err := e.PutMany(keys, pay); err != nil {
				t.Fatal(err)
			}
			load := func(what string, wantFixed bool) {
				t.Helper()
				clear(pool)
				s0 := dev.Stats()
				ok, err := e.LoadManyInto(keys, bufs)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				for i := range keys {
					if !ok[i] || !bytes.Equal(bufs[i][:len(pay[i])], pay[i]) {
						t.Fatalf("%s: key %d ok=%v, payload equal=%v", what, i, ok[i], bytes.Equal(bufs[i][:len(pay[i])], pay[i]))
					}
				}
				d := since(dev, s0)
				if wantFixed && (d.fixed != n || d.plain != 0) || !wantFixed && (d.plain != n || d.fixed != 0) {
					t.Fatalf("%s: %d fixed, %d plain SQEs; want %d %s", what, d.fixed, d.plain, n, map[bool]string{true: "fixed", false: "plain"}[wantFixed])
				}
			}
			load("before RegisterMemory", false)
			if err := e.RegisterMemory([][]byte{pool}); err != nil {
				t.Fatal(err)
			}
			if st := e.Stats(); st.RegisteredMemory != int64(len(pool)) || st.BuffersRegistered == noArena {
				t.Fatalf("after RegisterMemory: RegisteredMemory %d (want %d), arena registered %v (want %v)",
					st.RegisteredMemory, len(pool), st.BuffersRegistered, !noArena)
			}
			load("registered", true)
			// Puts still go through the arena: fixed only where the arena is registered.
			s0 := dev.Stats()
			if _, err := e.PutMany(extraKey, extraPay); err != nil {
				t.Fatal(err)
			}
			if d := since(dev, s0); noArena && d.fixed != 0 || !noArena && d.fixed != 1 {
				t.Fatalf("put after RegisterMemory: %d fixed, %d plain", d.fixed, d.plain)
			}
			// A set that covers half the buffers replaces the whole set.
			if err := e.RegisterMemory([][]byte{pool[:n/2*fixedSlot]}); err != nil {
				t.Fatal(err)
			}
			s0 = dev.Stats()
			if _, err := e.LoadManyInto(keys, bufs); err != nil {
				t.Fatal(err)
			}
			if d := since(dev, s0); d.fixed != n/2 || d.plain != n/2 {
				t.Fatalf("half registered: %d fixed, %d plain; want %d each", d.fixed, d.plain, n/2)
			}
			if err := e.RegisterMemory(nil); err != nil {
				t.Fatal(err)
			}
			if st := e.Stats(); st.RegisteredMemory != 0 || st.BuffersRegistered == noArena {
				t.Fatalf("after RegisterMemory(nil): RegisteredMemory %d, arena registered %v", st.RegisteredMemory, st.BuffersRegistered)
			}
			load("dropped", false)
			if err := e.RegisterMemory([][]byte{pool, {}}); !errors.Is(err, engine.ErrConfig) {
				t.Fatalf("an empty buffer: %v, want ErrConfig", err)
			}
		})
	}
}

func TestRegisterMemoryUnsupported(t *testing.T) {
	dev := blockdev.NewMem(1<<20+8*fixedSlot, 4096)
	e, err := engine.Format(dev, fixedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b, err := blockdev.Alloc(fixedSlot)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(b)
	if err := e.RegisterMemory([][]byte{b}); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Fatalf("RegisterMemory on a memory device: %v, want ErrNotSupported", err)
	}
	e.Close()
	if err := e.RegisterMemory([][]byte{b}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("RegisterMemory after Close: %v, want ErrClosed", err)
	}
}
