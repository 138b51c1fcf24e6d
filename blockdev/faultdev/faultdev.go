// Package faultdev wraps any blockdev.Device with rules that inject faults into the
// operations they select — EIO, short and torn transfers, ENOSPC, silent read corruption,
// latency — so the engine's recovery, the torture harness and the NVMe paths are tested
// against a device that misbehaves the way real ones do (docs/reliability.md, "Fault
// injection"). Its users: the engine test suite (engine/enginetest) and the writer that rbctl
// torture kills (fault cycles); no command runs it on a real device.
package faultdev

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Device wraps a blockdev.Device and injects faults on the operations its rules select, in the
// spirit of pebble's vfs/errorfs: EIO, short transfers, torn writes (only a prefix of the
// logical blocks reaches the device), ENOSPC, silent read corruption and latency. Rules pick
// operations by class (read, write, deallocate, flush), byte range, ordinal (the Nth matching
// op, or every op after the first N), a predicate, or at random from a seed. A Device is
// itself a blockdev.Device, so faults compose by wrapping a wrapper.
//
// Rules are evaluated in order for each op; the first rule that fires decides the op's
// fault. Every rule counts the ops it matches, whether or not an earlier rule fired.
// A Device forwards blockdev.BufferRegistrar to the wrapped device when it implements it, so an
// engine on a wrapped io_uring or passthrough device keeps its fixed (registered) I/O.
type Device struct {
	inner blockdev.Device
	info  blockdev.Info

	mu     sync.Mutex
	rules  []*ruleState
	rng    *rand.Rand
	seq    int64 // ops seen, all classes
	counts FaultCounts
}

// OpClass selects the kind of device operation a rule applies to; classes combine with |.
type OpClass uint8

const (
	ClassRead OpClass = 1 << iota
	ClassWrite
	ClassDeallocate
	ClassFlush

	// ClassAny matches every operation.
	ClassAny = ClassRead | ClassWrite | ClassDeallocate | ClassFlush
)

func (c OpClass) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassWrite:
		return "write"
	case ClassDeallocate:
		return "deallocate"
	case ClassFlush:
		return "flush"
	case ClassAny:
		return "any"
	}
	return fmt.Sprintf("class(%#x)", uint8(c))
}

// FaultKind is what a firing rule does to the operation.
type FaultKind uint8

const (
	// FaultEIO fails the op with EIO without touching the device.
	FaultEIO FaultKind = iota + 1
	// FaultENOSPC fails a write, deallocate or flush with ENOSPC without touching the
	// device (a read it selects fails with EIO).
	FaultENOSPC
	// FaultShort transfers a prefix of the buffer (Fault.Fraction, default half, rounded
	// down to whole logical blocks) and reports the op as short: N < len(Buf), Err set.
	// Deallocate: only a prefix of the ranges is deallocated, then the call fails.
	FaultShort
	// FaultTorn writes only a prefix of the blocks (as FaultShort) and then either fails the
	// op with EIO or, with Fault.Succeed, reports full success: a torn write the caller
	// cannot see, as a crash between the blocks would leave it. Reads are not torn.
	FaultTorn
	// FaultCorrupt performs a read and then flips one byte of the result (Fault.At),
	// silently: data rot the caller must detect by checksum. Writes store the flipped byte
	// instead (the caller's buffer is untouched).
	FaultCorrupt
	// FaultLatency sleeps Fault.Delay and then performs the op normally.
	FaultLatency
)

var faultNames = map[FaultKind]string{
	FaultEIO: "EIO", FaultENOSPC: "ENOSPC", FaultShort: "short", FaultTorn: "torn",
	FaultCorrupt: "corrupt", FaultLatency: "latency",
}

func (k FaultKind) String() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return fmt.Sprintf("fault(%d)", uint8(k))
}

// ErrInjected marks every error a Device device produces; errors.Is(err, ErrInjected) tells
// an injected failure from a real one. Injected EIO and ENOSPC also match syscall.EIO and
// syscall.ENOSPC, and short transfers match ErrShortTransfer.
var ErrInjected = errors.New("injected fault")

// ErrShortTransfer reports an op that moved fewer bytes than asked.
var ErrShortTransfer = errors.New("short transfer")

// OpInfo describes one operation to a rule's predicate and to Rule.Then.
type OpInfo struct {
	Class  OpClass
	Off    int64            // byte offset (0 for flush)
	Len    int64            // bytes (for deallocate: the sum of the ranges)
	Seq    int64            // 1-based ordinal of the op among all ops this Device has seen
	Handle placement.Handle // placement handle of a write (placement.None otherwise)
}

// Fault is what happens to an operation a rule selects.
type Fault struct {
	Kind FaultKind
	// Fraction of the op's bytes that reach the device for FaultShort and FaultTorn,
	// rounded down to whole blocks (of TornUnit, else Info.LogicalBlock, else 512 bytes).
	// 0 means one half. For a one-block op the prefix is empty.
	Fraction float64
	// TornUnit is the granularity of short and torn transfers in bytes (0: logical block;
	// on a Direct device rounded up to a multiple of the logical block).
	TornUnit int
	// Succeed makes a torn write report success (N = len(Buf), Err = nil).
	Succeed bool
	// At selects the byte FaultCorrupt flips: At-1 (clamped to the buffer); 0 picks a byte
	// from the op's ordinal.
	At int
	// Delay for FaultLatency.
	Delay time.Duration
	// Err replaces the error reported for EIO, ENOSPC, short and failing torn faults; it is
	// still wrapped with ErrInjected.
	Err error
}

// Rule selects operations and the fault to inject on them. The zero selector fields match
// everything: Class 0 means ClassAny, an empty byte range means the whole device.
type Rule struct {
	Name  string  // for FaultCounts and error messages
	Class OpClass // 0: any
	// [OffLo, OffHi): the op must overlap this byte range; OffHi 0 means no upper bound.
	OffLo, OffHi int64
	// Pred, when set, must return true for the op to match.
	Pred func(OpInfo) bool
	// Nth fires only on the Nth matching op (1-based). After fires on every matching op
	// after the first After ones. Both 0: every matching op is a candidate.
	Nth, After int64
	// Prob, when in (0, 1), fires on a candidate with that probability, drawn from the
	// Device's seeded generator; 0 or 1 means always.
	Prob float64
	// Times caps how often the rule fires (0: unlimited).
	Times int64
	Fault Fault
	// Then, when set, runs after the fault has been applied (outside any lock), e.g. to
	// kill the process in the middle of a checkpoint in a crash test.
	Then func(OpInfo)
}

type ruleState struct {
	Rule
	matched int64
	fired   int64
}

// FaultCounts counts what a Device did.
type FaultCounts struct {
	Ops      int64            // operations seen (reads + writes + deallocates + flushes)
	Injected int64            // operations a fault was injected on
	ByRule   map[string]int64 // fired count per rule name
	ByKind   map[FaultKind]int64
}

// New wraps inner with the given rules; seed drives the random (Prob) rules, so a
// run is reproducible from its seed.
func New(inner blockdev.Device, seed uint64, rules ...Rule) *Device {
	f := &Device{inner: inner, info: inner.Info(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, r := range rules {
		f.addLocked(r)
	}
	return f
}

// Add appends a rule while the device is in use.
func (f *Device) Add(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addLocked(r)
}

// Clear removes every rule: later ops pass straight through.
func (f *Device) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

func (f *Device) addLocked(r Rule) {
	if r.Class == 0 {
		r.Class = ClassAny
	}
	if r.Name == "" {
		r.Name = fmt.Sprintf("rule%d-%s-%s", len(f.rules), r.Class, r.Fault.Kind)
	}
	f.rules = append(f.rules, &ruleState{Rule: r})
}

// Inner returns the wrapped device.
func (f *Device) Inner() blockdev.Device { return f.inner }

// Counts returns a copy of the injection counters.
func (f *Device) Counts() FaultCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.counts
	c.ByRule = make(map[string]int64, len(f.counts.ByRule))
	for k, v := range f.counts.ByRule {
		c.ByRule[k] = v
	}
	c.ByKind = make(map[FaultKind]int64, len(f.counts.ByKind))
	for k, v := range f.counts.ByKind {
		c.ByKind[k] = v
	}
	return c
}

// Info reports the wrapped device's geometry.
func (f *Device) Info() blockdev.Info { return f.info }

// decide returns the rule that fires for op (nil: none) and records the op.
func (f *Device) decide(op OpInfo) (*ruleState, OpInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	op.Seq = f.seq
	f.counts.Ops++
	var hit *ruleState
	for _, r := range f.rules {
		if r.Class&op.Class == 0 {
			continue
		}
		if r.OffHi > 0 || r.OffLo > 0 {
			end := op.Off + op.Len
			if op.Class == ClassFlush || end <= r.OffLo || (r.OffHi > 0 && op.Off >= r.OffHi) {
				continue
			}
		}
		if r.Pred != nil && !r.Pred(op) {
			continue
		}
		r.matched++
		if hit != nil {
			continue
		}
		if r.Nth > 0 && r.matched != r.Nth {
			continue
		}
		if r.After > 0 && r.matched <= r.After {
			continue
		}
		if r.Times > 0 && r.fired >= r.Times {
			continue
		}
		if r.Prob > 0 && r.Prob < 1 && f.rng.Float64() >= r.Prob {
			continue
		}
		r.fired++
		hit = r
	}
	if hit != nil {
		f.counts.Injected++
		if f.counts.ByRule == nil {
			f.counts.ByRule = map[string]int64{}
			f.counts.ByKind = map[FaultKind]int64{}
		}
		f.counts.ByRule[hit.Name]++
		f.counts.ByKind[hit.Fault.Kind]++
	}
	return hit, op
}

func (f *Device) injectedErr(r *ruleState, op OpInfo, base error) error {
	if r.Fault.Err != nil {
		base = r.Fault.Err
	}
	return fmt.Errorf("%w (%s on %s [%d,+%d)): %w", ErrInjected, r.Name, op.Class, op.Off, op.Len, base)
}

// prefixLen is how many bytes of an n-byte transfer a short or torn fault lets through.
func (f *Device) prefixLen(flt Fault, n int) int {
	unit := flt.TornUnit
	if unit <= 0 {
		unit = f.info.LogicalBlock
	}
	if unit <= 0 {
		unit = 512
	}
	if lb := f.info.LogicalBlock; f.info.Direct && lb > 0 && unit%lb != 0 {
		unit = (unit/lb + 1) * lb // a Direct device takes whole logical blocks only
	}
	frac := flt.Fraction
	if frac <= 0 || frac >= 1 {
		frac = 0.5
	}
	p := int(float64(n) * frac)
	return p - p%unit
}

// Submit runs the batch, applying faults op by op. Ops without a firing rule are passed to
// the wrapped device together, as one batch, so its concurrency is preserved.
func (f *Device) Submit(ops []blockdev.Op) error {
	type pending struct {
		i    int
		rule *ruleState
		info OpInfo
	}
	var faulted []pending
	pass := make([]int, 0, len(ops))
	for i := range ops {
		cls := ClassRead
		if ops[i].Write {
			cls = ClassWrite
		}
		h := placement.None
		if ops[i].Write {
			h = ops[i].Handle
		}
		r, oi := f.decide(OpInfo{Class: cls, Off: ops[i].Off, Len: int64(ops[i].Len()), Handle: h})
		if r == nil {
			pass = append(pass, i)
			continue
		}
		faulted = append(faulted, pending{i, r, oi})
	}
	// Latency first, so the delayed ops still run with their batch.
	for _, p := range faulted {
		if p.rule.Fault.Kind == FaultLatency && p.rule.Fault.Delay > 0 {
			time.Sleep(p.rule.Fault.Delay)
		}
	}
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if len(faulted) == 0 {
		return f.inner.Submit(ops)
	}
	// Pass-through ops, plus latency ops, in one inner batch.
	inner := make([]blockdev.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for _, i := range pass {
		inner = append(inner, ops[i])
		idx = append(idx, i)
	}
	for _, p := range faulted {
		if p.rule.Fault.Kind == FaultLatency {
			inner = append(inner, ops[p.i])
			idx = append(idx, p.i)
		}
	}
	if len(inner) > 0 {
		f.inner.Submit(inner) // per-op errors are copied back below
		for j, i := range idx {
			ops[i].N, ops[i].Err = inner[j].N, inner[j].Err
		}
	}
	for _, p := range faulted {
		op := &ops[p.i]
		switch p.rule.Fault.Kind {
		case FaultLatency:
		case FaultEIO:
			op.N, op.Err = 0, f.injectedErr(p.rule, p.info, syscall.EIO)
		case FaultENOSPC:
			if op.Write {
				op.N, op.Err = 0, f.injectedErr(p.rule, p.info, syscall.ENOSPC)
			} else {
				op.N, op.Err = 0, f.injectedErr(p.rule, p.info, syscall.EIO)
			}
		case FaultShort, FaultTorn:
			f.partial(op, p.rule, p.info)
		case FaultCorrupt:
			f.corrupt(op, p.rule, p.info)
		}
	}
	for i := range ops {
		note(ops[i].Err)
	}
	for _, p := range faulted {
		if p.rule.Then != nil {
			p.rule.Then(p.info)
		}
	}
	return first
}

// partial transfers a block-aligned prefix of op and reports it as the fault says.
func (f *Device) partial(op *blockdev.Op, r *ruleState, oi OpInfo) {
	n := f.prefixLen(r.Fault, op.Len())
	op.N = 0
	var err error
	if n > 0 {
		sub := []blockdev.Op{{Write: op.Write, Off: op.Off, Buf: op.Buf, Handle: op.Handle}}
		if n <= len(op.Buf) {
			sub[0].Buf = op.Buf[:n]
		} else {
			sub[0].Tail = op.Tail[:n-len(op.Buf)]
		}
		err = f.inner.Submit(sub)
		op.N = sub[0].N
	}
	switch {
	case err != nil:
		op.Err = err
	case r.Fault.Kind == FaultTorn && op.Write && r.Fault.Succeed:
		op.N, op.Err = op.Len(), nil
	case r.Fault.Kind == FaultTorn:
		op.Err = f.injectedErr(r, oi, syscall.EIO)
	default:
		op.Err = f.injectedErr(r, oi, fmt.Errorf("%w: %d of %d bytes", ErrShortTransfer, op.N, op.Len()))
	}
}

// corrupt performs op and flips one byte: of the data read, or of the data written (the
// caller's buffer is left as it was).
func (f *Device) corrupt(op *blockdev.Op, r *ruleState, oi OpInfo) {
	if op.Len() == 0 {
		op.Err = f.inner.Submit([]blockdev.Op{*op})
		return
	}
	pos := int(uint64(oi.Seq) * 2654435761 % uint64(op.Len())) // #nosec: any byte will do
	if at := r.Fault.At; at > 0 {
		pos = min(at-1, op.Len()-1)
	}
	if op.Write {
		// One aligned copy of Buf and Tail together (a Direct device takes it as it would
		// the caller's buffers), with the byte flipped.
		cp, err := blockdev.Alloc(op.Len())
		if err != nil {
			op.Err = err
			return
		}
		defer blockdev.Free(cp)
		copy(cp[copy(cp, op.Buf):], op.Tail)
		cp[pos] ^= 0x5a
		sub := []blockdev.Op{{Write: true, Off: op.Off, Buf: cp, Handle: op.Handle}}
		f.inner.Submit(sub)
		op.N, op.Err = sub[0].N, sub[0].Err
		return
	}
	sub := []blockdev.Op{{Off: op.Off, Buf: op.Buf, Handle: op.Handle}}
	f.inner.Submit(sub)
	op.N, op.Err = sub[0].N, sub[0].Err
	if op.Err == nil {
		op.Buf[pos] ^= 0x5a
	}
}

// Deallocate applies faults to the call as a whole (Off/Len of the first range and the
// total length are shown to rules).
func (f *Device) Deallocate(ranges []blockdev.Range) error {
	oi := OpInfo{Class: ClassDeallocate, Handle: placement.None}
	if len(ranges) > 0 {
		oi.Off = ranges[0].Off
		for _, r := range ranges {
			oi.Len += r.Len
		}
		// A rule's byte range must overlap some range: widen to the span.
		last := ranges[len(ranges)-1]
		if end := last.Off + last.Len; end > oi.Off+oi.Len {
			oi.Len = end - oi.Off
		}
	}
	r, oi := f.decide(oi)
	if r == nil {
		return f.inner.Deallocate(ranges)
	}
	defer func() {
		if r.Then != nil {
			r.Then(oi)
		}
	}()
	switch r.Fault.Kind {
	case FaultLatency:
		time.Sleep(r.Fault.Delay)
		return f.inner.Deallocate(ranges)
	case FaultENOSPC:
		return f.injectedErr(r, oi, syscall.ENOSPC)
	case FaultShort, FaultTorn:
		n := len(ranges) / 2
		if n > 0 {
			if err := f.inner.Deallocate(ranges[:n]); err != nil {
				return err
			}
		}
		if r.Fault.Kind == FaultTorn && r.Fault.Succeed {
			return nil
		}
		return f.injectedErr(r, oi, fmt.Errorf("%w: %d of %d ranges", ErrShortTransfer, n, len(ranges)))
	case FaultCorrupt:
		return f.inner.Deallocate(ranges)
	default:
		return f.injectedErr(r, oi, syscall.EIO)
	}
}

// Flush fails with the injected error (the writes stay wherever the wrapped device has
// them), is delayed, or with a silent torn fault (Succeed) is dropped: success is reported
// without flushing.
func (f *Device) Flush() error {
	r, oi := f.decide(OpInfo{Class: ClassFlush, Handle: placement.None})
	if r == nil {
		return f.inner.Flush()
	}
	defer func() {
		if r.Then != nil {
			r.Then(oi)
		}
	}()
	switch r.Fault.Kind {
	case FaultLatency:
		time.Sleep(r.Fault.Delay)
		return f.inner.Flush()
	case FaultENOSPC:
		return f.injectedErr(r, oi, syscall.ENOSPC)
	case FaultCorrupt:
		return f.inner.Flush()
	case FaultTorn:
		if r.Fault.Succeed {
			return nil
		}
		return f.injectedErr(r, oi, syscall.EIO)
	default:
		return f.injectedErr(r, oi, syscall.EIO)
	}
}

// Close closes the wrapped device.
func (f *Device) Close() error { return f.inner.Close() }

var (
	_ blockdev.BufferRegistrar = (*Device)(nil)
	_ blockdev.VectoredWriter  = (*Device)(nil)
)

// VectoredWrites implements blockdev.VectoredWriter as the wrapped device does: a write with
// a Tail passes through whole, and a fault on it (a prefix, a flipped byte) treats Buf and
// Tail as one transfer.
func (f *Device) VectoredWrites() bool { return blockdev.WritesTail(f.inner) }

// RegisterBuffers implements blockdev.BufferRegistrar by forwarding to the wrapped device; it returns
// blockdev.ErrNotSupported when that device cannot register buffers. Faults are never injected here.
func (f *Device) RegisterBuffers(bufs [][]byte) error {
	r, ok := f.inner.(blockdev.BufferRegistrar)
	if !ok {
		return fmt.Errorf("faulty wrapper: inner %s device cannot register buffers: %w", f.info.Kind, blockdev.ErrNotSupported)
	}
	return r.RegisterBuffers(bufs)
}

var _ blockdev.Device = (*Device)(nil)
