package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
)

// Fixed (registered-buffer) I/O end to end: the engine registers its staging arena with the
// device, and puts, bounced loads, checkpoints and recovery go out as fixed ops.

const fixedSlot = 128 << 10 // recovery's 32-header batch (128 KiB) fits one arena buffer

func fixedConfig() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = fixedSlot
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.QueueDepth = 16
	c.RecoveryReaders = 2
	return c
}

func openUringFile(t *testing.T, path string, size int64) *blockdev.UringDevice {
	t.Helper()
	if size > 0 {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	d, err := blockdev.OpenUring(path, blockdev.UringOptions{QueueDepth: 16, Rings: 2})
	if errors.Is(err, blockdev.ErrNotSupported) {
		t.Skipf("kernel lacks io_uring: %v", err)
	}
	if err != nil {
		if bytes.Contains([]byte(err.Error()), []byte("O_DIRECT refused")) {
			t.Skipf("temp dir refuses O_DIRECT: %v", err)
		}
		t.Fatal(err)
	}
	return d
}

func fixedKeys(n int) ([]engine.Key, [][]byte) {
	keys := make([]engine.Key, n)
	pay := make([][]byte, n)
	for i := range keys {
		keys[i] = engine.ObjectKey("fixed/model", uint32(i%2), []byte(fmt.Sprintf("chunk-%06d", i)), "")
		p := make([]byte, 100<<10+1+i*7) // never a multiple of 4 KiB: these puts copy (zerocopy_test.go has the others)
		for j := range p {
			p[j] = byte(i*31 + j*7)
		}
		pay[i] = p
	}
	return keys, pay
}

// misaligned returns n-byte buffers that are not block-aligned, so Direct loads bounce
// through the engine's arena.
func misaligned(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size+1)[1:]
	}
	return out
}

type delta struct{ fixed, plain int64 }

func since(d *blockdev.UringDevice, s0 blockdev.UringStats) delta {
	s := d.Stats()
	return delta{s.FixedOps - s0.FixedOps, s.PlainOps - s0.PlainOps}
}

func TestFixedIOOnUring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fixed.img")
	const n = 20
	dev := openUringFile(t, path, 1<<20+64*fixedSlot)
	cfg := fixedConfig()
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if !st.BuffersRegistered || st.BufferPoolBytes != 16*fixedSlot || st.BufferRegisterErrors != 0 {
		t.Fatalf("after Format: registered=%v pool=%d errs=%d (%s); want registered, %d bytes, 0 errors",
			st.BuffersRegistered, st.BufferPoolBytes, st.BufferRegisterErrors, st.BufferRegisterError, 16*fixedSlot)
	}
	keys, pay := fixedKeys(n)

	s0 := dev.Stats()
	if _, err := e.PutMany(keys, pay); err != nil {
		t.Fatal(err)
	}
	if d := since(dev, s0); d.fixed < n || d.plain != 0 {
		t.Fatalf("PutMany of %d keys: %d fixed, %d plain SQEs; want >= %d fixed, 0 plain", n, d.fixed, d.plain, n)
	}

	// Loads into unaligned caller buffers bounce through the arena: fixed reads.
	s0 = dev.Stats()
	bufs := misaligned(n, 120<<10)
	ok, err := e.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i][:len(pay[i])], pay[i]) {
			t.Fatalf("load %d through the arena: ok=%v, payload equal=%v", i, ok[i], bytes.Equal(bufs[i][:len(pay[i])], pay[i]))
		}
	}
	if d := since(dev, s0); d.fixed < n || d.plain != 0 {
		t.Fatalf("bounced loads: %d fixed, %d plain; want >= %d fixed, 0 plain", d.fixed, d.plain, n)
	}

	// Aligned caller buffers are read into directly (no bounce, no copy): plain reads.
	s0 = dev.Stats()
	direct := make([][]byte, n)
	for i := range direct {
		b, err := blockdev.Alloc(120 << 10)
		if err != nil {
			t.Fatal(err)
		}
		defer blockdev.Free(b)
		direct[i] = b
	}
	if ok, err := e.LoadManyInto(keys, direct); err != nil || !ok[0] || !bytes.Equal(direct[n-1][:len(pay[n-1])], pay[n-1]) {
		t.Fatalf("direct loads: ok=%v err=%v", ok, err)
	}
	if d := since(dev, s0); d.plain < n || d.fixed != 0 {
		t.Fatalf("direct loads: %d fixed, %d plain; want 0 fixed (the caller's buffer is used as is), >= %d plain", d.fixed, d.plain, n)
	}

	// The checkpoint (header and payload in one arena buffer) writes fixed.
	s0 = dev.Stats()
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	if d := since(dev, s0); d.fixed != 2 || d.plain != 0 {
		t.Fatalf("checkpoint: %d fixed, %d plain writes; want 2 fixed (payload, header), 0 plain", d.fixed, d.plain)
	}
	if st := e.Stats(); st.BufferPoolMisses != 0 {
		t.Fatalf("BufferPoolMisses = %d; the arena holds a full batch, want 0", st.BufferPoolMisses)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Recovery's header reads go through the arena of the reopened engine.
	dev2 := openUringFile(t, path, 0)
	e2, err := engine.Open(dev2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if s := dev2.Stats(); s.FixedOps == 0 {
		t.Fatalf("after Open (verify on load): %+v; want fixed reads of the slot headers", s)
	}
	if st := e2.Stats(); st.Recovery.Kept != n || !st.BuffersRegistered {
		t.Fatalf("reopen: kept %d of %d, registered=%v", st.Recovery.Kept, n, st.BuffersRegistered)
	}
	bufs = misaligned(n, 120<<10)
	if ok, err := e2.LoadManyInto(keys, bufs); err != nil || !ok[n-1] || !bytes.Equal(bufs[n-1][:len(pay[n-1])], pay[n-1]) {
		t.Fatalf("load after reopen: ok=%v err=%v", ok, err)
	}
}

func TestFixedIODisabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*engine.Config)
		pool int64
	}{
		{"no-register", func(c *engine.Config) { c.NoRegisterBuffers = true }, 16 * fixedSlot},
		{"no-pool", func(c *engine.Config) { c.BufferPoolBytes = -1 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := openUringFile(t, filepath.Join(t.TempDir(), "plain.img"), 1<<20+16*fixedSlot)
			cfg := fixedConfig()
			tc.mod(&cfg)
			e, err := engine.Format(dev, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			keys, pay := fixedKeys(4)
			if _, err := e.PutMany(keys, pay); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			if s := dev.Stats(); s.FixedOps != 0 || s.PlainOps == 0 || st.BuffersRegistered || st.BufferPoolBytes != tc.pool {
				t.Fatalf("%+v registered=%v pool=%d; want only plain ops, unregistered, pool %d", s, st.BuffersRegistered, st.BufferPoolBytes, tc.pool)
			}
		})
	}
}

// TestFixedIOThroughFaulty: the fault-injection wrapper forwards the registration.
func TestFixedIOThroughFaulty(t *testing.T) {
	dev := openUringFile(t, filepath.Join(t.TempDir(), "faulty.img"), 1<<20+16*fixedSlot)
	e, err := engine.Format(faultdev.New(dev, 1), fixedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	keys, pay := fixedKeys(4)
	s0 := dev.Stats()
	if _, err := e.PutMany(keys, pay); err != nil {
		t.Fatal(err)
	}
	if d := since(dev, s0); !e.Stats().BuffersRegistered || d.fixed < 4 || d.plain != 0 {
		t.Fatalf("through Faulty: registered=%v, %d fixed, %d plain", e.Stats().BuffersRegistered, d.fixed, d.plain)
	}
}

// keepOpen hides Close: the device outlives the engine.
type keepOpen struct{ *blockdev.UringDevice }

func (keepOpen) Close() error { return nil }

// TestFixedIORegistrationDroppedOnClose: when the device outlives the engine, closing the
// engine must drop the arena's registration before unmapping it; otherwise memory mapped
// later at the same address would be served by the stale pinned pages.
func TestFixedIORegistrationDroppedOnClose(t *testing.T) {
	dev := openUringFile(t, filepath.Join(t.TempDir(), "outlive.img"), 1<<20+16*fixedSlot)
	defer dev.Close()
	cfg := fixedConfig()
	e, err := engine.Format(keepOpen{dev}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Stats().BuffersRegistered {
		t.Fatal("not registered through the wrapper")
	}
	keys, pay := fixedKeys(1)
	if _, err := e.PutMany(keys, pay); err != nil {
		t.Fatal(err)
	}
	m, _ := e.Lookup(keys[0])
	pool := e.Stats().BufferPoolBytes
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// A mapping of the arena's size usually lands where the arena was.
	b, err := blockdev.Alloc(int(pool))
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(b)
	want := roundUp(cfg.HeaderBytes+len(pay[0]), cfg.BlockAlign)
	if err := blockdev.ReadAt(dev, b[:want], m.Offset); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[cfg.HeaderBytes:cfg.HeaderBytes+len(pay[0])], pay[0]) {
		t.Fatal("read into fresh memory after engine Close did not land in it: stale buffer registration")
	}
	if s := dev.Stats(); s.FixedOps == 0 {
		t.Fatalf("%+v: the engine never used fixed ops", s)
	}
}

func roundUp(v, a int) int { return (v + a - 1) / a * a }

// regTransport puts the emulator behind a transport that accepts buffer registration (the
// emulator itself has none) and records each data command's BufIndex.
type regTransport struct {
	*emu.Controller
	mu           sync.Mutex
	registered   int
	fixed, plain int
}

func (r *regTransport) RegisterBuffers(bufs [][]byte) error {
	r.mu.Lock()
	r.registered = len(bufs)
	r.mu.Unlock()
	return nil
}

func (r *regTransport) IO(cmds []nvme.Command, done []nvme.Completion) {
	r.mu.Lock()
	for i := range cmds {
		if len(cmds[i].Data) == 0 {
			continue
		}
		if cmds[i].BufIndex >= 0 {
			r.fixed++
		} else {
			r.plain++
		}
	}
	r.mu.Unlock()
	r.Controller.IO(cmds, done)
}

func (r *regTransport) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fixed, r.plain
}

// TestFixedIOThroughNVMeDevice: over package nvme's passthrough device the engine's
// commands carry the arena's buffer index (the emulator ignores it; a URING_CMD transport
// turns it into IORING_URING_CMD_FIXED).
func TestFixedIOThroughNVMeDevice(t *testing.T) {
	c, err := emu.Open("emu:mem?size=16M&ru=1M&ruhs=2&op=0.5")
	if err != nil {
		t.Fatal(err)
	}
	rt := &regTransport{Controller: c}
	dev, err := nvme.NewDevice(rt, nvme.DeviceOptions{Kind: blockdev.KindEmulated})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	e, err := engine.Format(dev, fixedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.Stats().BuffersRegistered || rt.registered != 1 {
		t.Fatalf("registered=%v, transport saw %d buffers; want the arena as one buffer", e.Stats().BuffersRegistered, rt.registered)
	}
	keys, pay := fixedKeys(8)
	f0, p0 := rt.counts()
	if _, err := e.PutMany(keys, pay); err != nil {
		t.Fatal(err)
	}
	bufs := misaligned(len(keys), 120<<10)
	if ok, err := e.LoadManyInto(keys, bufs); err != nil || !ok[7] || !bytes.Equal(bufs[7][:len(pay[7])], pay[7]) {
		t.Fatalf("load: ok=%v err=%v", ok, err)
	}
	f1, p1 := rt.counts()
	if f1-f0 < 2*len(keys) || p1 != p0 {
		t.Fatalf("put+load of %d keys: %d commands with BufIndex >= 0, %d without; want >= %d, 0", len(keys), f1-f0, p1-p0, 2*len(keys))
	}
}

// placedTransport records, for every Write, whether it used a fixed buffer and its
// DTYPE/DSPEC.
type placedTransport struct {
	regTransport
	writes []struct {
		fixed       bool
		dtype, spec uint32
	}
}

func (r *placedTransport) IO(cmds []nvme.Command, done []nvme.Completion) {
	r.mu.Lock()
	for i := range cmds {
		if cmds[i].Opcode == nvme.OpWrite {
			r.writes = append(r.writes, struct {
				fixed       bool
				dtype, spec uint32
			}{cmds[i].BufIndex >= 0, cmds[i].CDW12 >> 20 & 0xf, cmds[i].CDW13 >> 16})
		}
	}
	r.mu.Unlock()
	r.regTransport.IO(cmds, done)
}

type saltHandle struct{}

func (saltHandle) Name() string { return "kv-rank-parity" }
func (saltHandle) Place(w placement.Write) placement.Handle {
	if w.Metadata {
		return 1
	}
	return placement.Handle(w.KVRank % 2)
}

// H8: a write from the registered arena keeps its placement — fixed-buffer Writes carry
// DTYPE=2 with the PID of the handle the Placer chose, so placement needs no per-buffer
// attribute.
// placedEngine formats an engine with cfg (its Placer set to saltHandle) on the emulator
// behind a placedTransport, over the passthrough device with PIDs 0 and 1. Close is the
// caller's.
func placedEngine(t *testing.T, cfg engine.Config) (*engine.Engine, *placedTransport) {
	t.Helper()
	c, err := emu.Open("emu:mem?size=16M&ru=1M&ruhs=2&op=0.5")
	if err != nil {
		t.Fatal(err)
	}
	rt := &placedTransport{regTransport: regTransport{Controller: c}}
	dev, err := nvme.NewDevice(rt, nvme.DeviceOptions{Kind: blockdev.KindEmulated, PIDs: []uint16{0, 1}})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	cfg.Placer = saltHandle{}
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, rt
}

func TestFixedIOKeepsPlacement(t *testing.T) {
	e, rt := placedEngine(t, fixedConfig())
	defer e.Close()
	rt.mu.Lock()
	rt.writes = nil
	rt.mu.Unlock()
	keys, pay := fixedKeys(8) // kv ranks alternate 0, 1
	if _, err := e.PutMany(keys, pay); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	specs := map[uint32]int{}
	for _, w := range rt.writes {
		if !w.fixed || w.dtype != 2 {
			t.Fatalf("write fixed=%v DTYPE=%d, want a fixed-buffer write with DTYPE=2", w.fixed, w.dtype)
		}
		specs[w.spec]++
	}
	if len(rt.writes) < len(keys) || specs[0] == 0 || specs[1] == 0 {
		t.Fatalf("%d writes for %d puts, DSPEC counts %v; want both PIDs used", len(rt.writes), len(keys), specs)
	}
}
