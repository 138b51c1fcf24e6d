package engine

import "github.com/rbctl/rbctl/blockdev"

// Overlapping a batch's checksums with its I/O.
//
// A put checksums each payload before its write; a load verifies each payload after its
// read. Done batch by batch — every checksum of a put batch before its first write, no
// verification before a load batch's last read — the device had only the other callers'
// ops while a caller checksummed, and the ring ran dry whenever they were all checksumming
// (docs/io_uring.md, "Issue 37"). On a device that runs batches in
// the background (blockdev.Starter) an opStream hands the ops over in chunks of about
// startBytes as they are added: a put's first writes run while it checksums the rest, and
// a load, which adds all its reads at once, verifies each chunk as soon as that chunk is
// done while the later reads are still in flight. On any other device the whole batch is
// one Submit, as before.

// startBytes is the size of a started chunk: small enough that the device gets work early
// and a load has little left to verify after its last read, large enough that a chunk
// costs one queue operation per megabyte (16 ops at 64 KiB, one at 1 MiB and above).
const startBytes = 1 << 20

// opStream is one batch of ops cut into chunks; chunk k is ops[lo(k):ends[k]].
type opStream struct {
	dev     blockdev.Device
	st      blockdev.Starter // nil: the device has no Start
	ops     []blockdev.Op    // capacity fixed at creation: started chunks alias it
	ends    []int
	runs    []blockdev.Started // chunk k's run, on a Starter
	waited  int                // runs[:waited] have been waited for
	pending int                // bytes of the ops not in a chunk yet

	// Room for the chunks of a small batch (a GET's one read, a put batch of up to
	// 2 MiB), so that ends and runs are not allocated apiece; a larger batch's grow.
	endsBuf [2]int
	runsBuf [2]blockdev.Started
}

// newOpStream is an empty stream of at most n ops to dev.
func newOpStream(dev blockdev.Device, n int) *opStream {
	return newOpStreamIn(dev, make([]blockdev.Op, 0, n))
}

// newOpStreamIn is an empty stream of at most cap(ops) ops to dev, kept in ops' array. The
// ops already there may be added again in order, each overwriting itself (a load's
// prepared reads: no second array per batch).
func newOpStreamIn(dev blockdev.Device, ops []blockdev.Op) *opStream {
	st, _ := dev.(blockdev.Starter)
	s := &opStream{dev: dev, st: st, ops: ops[:0]}
	s.ends, s.runs = s.endsBuf[:0], s.runsBuf[:0]
	return s
}

// add appends op and, on a Starter, starts the ops added since the last chunk once they
// hold startBytes.
func (s *opStream) add(op blockdev.Op) {
	if len(s.ops) == cap(s.ops) {
		panic("engine: opStream holds more ops than it was made for")
	}
	s.ops = append(s.ops, op)
	s.pending += op.Len()
	if s.st != nil && s.pending >= startBytes {
		s.cut()
	}
}

func (s *opStream) lo(k int) int {
	if k == 0 {
		return 0
	}
	return s.ends[k-1]
}

// cut makes the ops not in a chunk yet the next chunk and starts it on a Starter.
func (s *opStream) cut() {
	lo := s.lo(len(s.ends))
	if lo == len(s.ops) {
		return
	}
	s.ends = append(s.ends, len(s.ops))
	s.pending = 0
	if s.st != nil {
		s.runs = append(s.runs, s.st.Start(s.ops[lo:len(s.ops):len(s.ops)]))
	}
}

// chunks ends the last chunk (starting it on a Starter) and returns how many there are.
func (s *opStream) chunks() int {
	s.cut()
	return len(s.ends)
}

// wait returns the range of chunk k once its ops are done — on a device without Start it
// submits them — and the first error among them (as Device.Submit). Chunks are waited for
// in order, each once.
func (s *opStream) wait(k int) (lo, hi int, err error) {
	lo, hi = s.lo(k), s.ends[k]
	s.waited = k + 1
	if s.st == nil {
		return lo, hi, s.dev.Submit(s.ops[lo:hi])
	}
	return lo, hi, s.runs[k].Wait()
}

// waitAll waits for every chunk not waited for yet (ending the last one first) and returns
// the first error.
func (s *opStream) waitAll() error {
	var first error
	for k := s.waited; k < s.chunks(); k++ {
		if _, _, err := s.wait(k); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// drain waits for the chunks already started, and starts none: the batch was abandoned
// while it was being prepared, and the started ops must finish before their buffers are
// reused.
func (s *opStream) drain() {
	for k := s.waited; k < len(s.runs); k++ {
		s.runs[k].Wait()
	}
	s.waited = len(s.runs)
}
