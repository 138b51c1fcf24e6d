// Package enginetest is the engine's behaviour suite, runnable against any blockdev.Device
// backend: posix files, io_uring, NVMe passthrough, the emulated FDP SSD.
//
//	func TestEngineOnMyBackend(t *testing.T) {
//		enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device { return openMine(t) })
//	}
//
// newDev must return a fresh, zeroed device of at least MinDeviceBytes whose logical block
// size divides 4096. The suite never closes it through the engine (it wraps it), and closes
// it itself at the end of each subtest.
package enginetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// MinDeviceBytes is the smallest device the suite needs.
const MinDeviceBytes = 32 << 20

// Config returns the suite's base config (LMCache's raw_block_test_utils values: align
// 4096, header 4096, slot 64 KiB, meta 1 MiB), with the periodic checkpoint off.
func Config() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = 64 << 10
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.RecoveryReaders = 3
	c.QueueDepth = 8
	return c
}

// keepOpen hides Close so that the engine can be closed and reopened on the same device.
type keepOpen struct{ blockdev.Device }

func (keepOpen) Close() error { return nil }

// RegisterBuffers forwards the engine's buffer registration, so the suite on io_uring runs
// with fixed I/O as the engine would in production.
func (k keepOpen) RegisterBuffers(bufs [][]byte) error { return forwardRegister(k.Device, bufs) }

// VectoredWrites passes the device's vectored writes on (the wrappers do not look at Buf).
func (k keepOpen) VectoredWrites() bool { return blockdev.WritesTail(k.Device) }

// forwardRegister registers bufs with inner when it can (blockdev.ErrNotSupported otherwise).
func forwardRegister(inner blockdev.Device, bufs [][]byte) error {
	r, ok := inner.(blockdev.BufferRegistrar)
	if !ok {
		return fmt.Errorf("suite wrapper over %s: %w", inner.Info().Kind, blockdev.ErrNotSupported)
	}
	return r.RegisterBuffers(bufs)
}

// gate blocks writes while closed (to hold puts in flight).
type gate struct {
	blockdev.Device
	mu      sync.Mutex
	blocked bool
	entered chan struct{}
	release chan struct{}
}

func (g *gate) RegisterBuffers(bufs [][]byte) error { return forwardRegister(g.Device, bufs) }
func (g *gate) VectoredWrites() bool                { return blockdev.WritesTail(g.Device) }

func (g *gate) Submit(ops []blockdev.Op) error {
	g.mu.Lock()
	blocked := g.blocked && len(ops) > 0 && ops[0].Write
	g.mu.Unlock()
	if blocked {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Device.Submit(ops)
}

type env struct {
	t   *testing.T
	dev blockdev.Device
}

func (v *env) format(c engine.Config) *engine.Engine {
	v.t.Helper()
	e, err := engine.Format(keepOpen{v.dev}, c)
	if err != nil {
		v.t.Fatalf("Format: %v", err)
	}
	return e
}

func (v *env) open(c engine.Config) *engine.Engine {
	v.t.Helper()
	e, err := engine.Open(keepOpen{v.dev}, c)
	if err != nil {
		v.t.Fatalf("Open: %v", err)
	}
	return e
}

// K returns a deterministic object key.
func K(i int, salt string) engine.Key {
	return engine.ObjectKey("test/model", uint32(i%4), []byte(fmt.Sprintf("chunk-%08d", i)), salt)
}

// Payload returns a deterministic payload for key i.
func Payload(i, n int) []byte {
	b := make([]byte, n)
	x := uint32(i*2654435761 + 1)
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = byte(x)
	}
	return b
}

func mustPut(t *testing.T, e *engine.Engine, keys []engine.Key, p [][]byte) engine.PutResult {
	t.Helper()
	r, err := e.PutMany(keys, p)
	if err != nil {
		t.Fatalf("PutMany: %v", err)
	}
	return r
}

func load(t *testing.T, e *engine.Engine, k engine.Key, n int) ([]byte, bool) {
	t.Helper()
	buf := make([]byte, n)
	ok, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
	if err != nil {
		t.Fatalf("LoadManyInto: %v", err)
	}
	return buf, ok[0]
}

func eqBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// writeRaw overwrites device bytes at off (aligned, read-modify-write of whole blocks).
func writeRaw(t *testing.T, dev blockdev.Device, off int64, data []byte) {
	t.Helper()
	const blk = 4096
	start := off / blk * blk
	end := (off + int64(len(data)) + blk - 1) / blk * blk
	b, err := blockdev.Alloc(int(end - start))
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(b)
	if err := blockdev.ReadAt(dev, b, start); err != nil {
		t.Fatal(err)
	}
	copy(b[off-start:], data)
	if err := blockdev.WriteAt(dev, b, start, placement.None); err != nil {
		t.Fatal(err)
	}
}

type salted struct{}

func (salted) Name() string { return "salted-test" }
func (salted) Place(w placement.Write) placement.Handle {
	if w.Metadata {
		return 7
	}
	if w.CacheSalt == "b" {
		return 1
	}
	return 0
}

// RunEngineSuite runs every behaviour test against devices from newDev.
func RunEngineSuite(t *testing.T, newDev func(t *testing.T) blockdev.Device) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newDev(t)
			if dev.Info().Size < MinDeviceBytes {
				t.Fatalf("device of %d bytes, the suite needs %d", dev.Info().Size, MinDeviceBytes)
			}
			defer dev.Close()
			tc.fn(t, &env{t: t, dev: dev})
		})
	}
}

// suiteCase is one behaviour test of the suite.
type suiteCase struct {
	name string
	fn   func(t *testing.T, v *env)
}

var cases = slices.Concat(opCases, recoveryCases, placementCases, deallocCases, zeroCopyCases)
