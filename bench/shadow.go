package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
)

// ShadowDevice wraps a device and feeds every completed write and deallocate it forwards to
// an FTL model, so any run (a plain file, a loop device, a real SSD) gets a host-side WAF
// estimate of the exact stream the engine issued. The estimate is modelled, not measured.
type ShadowDevice struct {
	inner blockdev.Device
	// KeepInnerOpen makes Close flush instead of closing the wrapped device, so one device
	// can serve several engines in turn (rbctl bench re-formats it per policy).
	KeepInnerOpen bool
	gate          sync.RWMutex // held shared by every op, exclusively by Quiesce
	mu            sync.Mutex
	m             *ftl.Model
	nh            int

	infeasible   bool
	written      int64 // bytes of every completed write, with or without a model
	deallocBytes int64
	foreign      int64 // writes whose handle the model does not have (sent to handle 0)

	// rec, when recording (Record), is every write and deallocate the model was fed, in
	// its order, for replays under other device settings (explain.go).
	rec       []shadowOp
	recording bool
	mark      int // len(rec) at the last snapshot
}

// NewShadow wraps inner; m's logical size should cover inner's size.
//
// A nil m gives a pass-through device that models nothing (Infeasible reports true): the
// run goes on without an estimate.
func NewShadow(inner blockdev.Device, m *ftl.Model) *ShadowDevice {
	if m == nil {
		return &ShadowDevice{inner: inner, infeasible: true}
	}
	return &ShadowDevice{inner: inner, m: m, nh: m.Config().Handles}
}

// Info implements blockdev.Device.
func (s *ShadowDevice) Info() blockdev.Info { return s.inner.Info() }

// Submit implements blockdev.Device: forward, then record the writes that completed.
func (s *ShadowDevice) Submit(ops []blockdev.Op) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	err := s.inner.Submit(ops)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ops {
		op := &ops[i]
		if !op.Write || op.Err != nil {
			continue
		}
		n := int64(op.N)
		if n == 0 {
			n = int64(op.Len())
		}
		s.written += n
		if s.infeasible {
			continue
		}
		h := int(op.Handle)
		if op.Handle == placement.None {
			h = 0
		} else if h < 0 || h >= s.nh {
			s.foreign++
			h = 0
		}
		if werr := s.m.WriteBytes(op.Off, n, h); errors.Is(werr, ftl.ErrInfeasible) {
			s.infeasible = true
		}
		s.record(op.Off, n, h)
	}
	return err
}

// Deallocate implements blockdev.Device: forward, and tell the model when the device took it.
func (s *ShadowDevice) Deallocate(ranges []blockdev.Range) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	err := s.inner.Deallocate(ranges)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range ranges {
		if s.m != nil {
			s.m.DeallocateBytes(r.Off, r.Len)
		}
		s.record(r.Off, -r.Len, 0)
		s.deallocBytes += r.Len
	}
	return nil
}

// Quiesce waits until no write or deallocate is in flight, holds new ones back, and runs f:
// device counters (the FDP statistics log) and the model's read inside f cover exactly the
// same operations.
func (s *ShadowDevice) Quiesce(f func()) {
	s.gate.Lock()
	defer s.gate.Unlock()
	f()
}

// Flush implements blockdev.Device.
func (s *ShadowDevice) Flush() error { return s.inner.Flush() }

// Close implements blockdev.Device.
func (s *ShadowDevice) Close() error {
	if s.KeepInnerOpen {
		return s.inner.Flush()
	}
	return s.inner.Close()
}

var (
	_ blockdev.BufferRegistrar = (*ShadowDevice)(nil)
	_ blockdev.VectoredWriter  = (*ShadowDevice)(nil)
)

// VectoredWrites implements blockdev.VectoredWriter as the wrapped device does (the model
// counts a write's Buf and Tail together).
func (s *ShadowDevice) VectoredWrites() bool { return blockdev.WritesTail(s.inner) }

// RegisterBuffers implements blockdev.BufferRegistrar by forwarding to the wrapped device
// (io_uring fixed buffers survive the shadow); blockdev.ErrNotSupported when it cannot.
func (s *ShadowDevice) RegisterBuffers(bufs [][]byte) error {
	r, ok := s.inner.(blockdev.BufferRegistrar)
	if !ok {
		return fmt.Errorf("shadow device: inner %s device cannot register buffers: %w", s.inner.Info().Kind, blockdev.ErrNotSupported)
	}
	return r.RegisterBuffers(bufs)
}

// Unwrap returns the wrapped device (for type checks such as an FDP statistics reader).
func (s *ShadowDevice) Unwrap() blockdev.Device { return s.inner }

// Stats returns the model's counters.
func (s *ShadowDevice) Stats() ftl.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return ftl.Stats{}
	}
	return s.m.Stats()
}

// WrittenBytes is the bytes of every write the device completed: measured, whether or not a
// model runs.
func (s *ShadowDevice) WrittenBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// DeallocatedBytes is the total the device accepted for deallocation.
func (s *ShadowDevice) DeallocatedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deallocBytes
}

// Infeasible reports whether the model ran out of space (it stops counting from then on).
func (s *ShadowDevice) Infeasible() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infeasible
}

// ForeignHandleWrites counts writes with a handle beyond the model's (modelled on handle 0).
func (s *ShadowDevice) ForeignHandleWrites() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.foreign
}

// ParsePrecondition checks a precondition name Precondition takes: trim (or fresh, or ""
// for trim) and fill (or sequential). It returns s.
func ParsePrecondition(s string) (string, error) {
	switch s {
	case "", "trim", "fresh", "fill", "sequential":
		return s, nil
	}
	return "", fmt.Errorf("unknown precondition %q; want trim or fill", s)
}

// Precondition prepares the device and the model the same way: "fill" writes every block
// of the device once, sequentially, with no placement directive; "trim" deallocates the
// whole device (ignored by the device when it cannot, the model is trimmed anyway, and
// the caller is told through the returned note). A fill stops early, with ctx's error,
// when ctx is cancelled.
func (s *ShadowDevice) Precondition(ctx context.Context, mode string, chunk int) (note string, err error) {
	size := s.inner.Info().Size
	switch mode {
	case "", "trim", "fresh":
		if err := s.inner.Deallocate([]blockdev.Range{{Off: 0, Len: size}}); err != nil {
			note = "device could not deallocate (" + err.Error() + "); only the model was trimmed"
		}
		s.mu.Lock()
		if s.m != nil {
			s.m.DeallocateBytes(0, size)
		}
		s.record(0, -size, 0)
		s.mu.Unlock()
		return note, nil
	case "fill", "sequential":
		buf, err := blockdev.Alloc(chunk)
		if err != nil {
			return "", err
		}
		defer blockdev.Free(buf)
		for off := int64(0); off < size; off += int64(chunk) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			n := min(int64(chunk), size-off)
			if err := s.Submit([]blockdev.Op{{Write: true, Off: off, Buf: buf[:n], Handle: placement.None}}); err != nil {
				return "", err
			}
		}
		return "", s.inner.Flush()
	}
	return "", errors.New("unknown precondition " + mode + " (trim or fill)")
}
