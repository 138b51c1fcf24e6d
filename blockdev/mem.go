package blockdev

import (
	"fmt"
	"sync"
)

// Mem is an in-memory Device for tests. It checks ops like a Direct device when
// logicalBlock > 0, records the handle of the last write to each logical block when asked,
// and supports Deallocate (zeroes the range). Safe for concurrent use.
type Mem struct {
	mu     sync.RWMutex
	data   []byte
	info   Info
	closed bool

	// Counters, readable with Counters().
	writes, reads, deallocs, flushes int64
	writeBytes, readBytes            int64
}

// MemCounters are the operation counts a Mem device has seen.
type MemCounters struct {
	Writes, Reads, Deallocates, Flushes int64
	WriteBytes, ReadBytes               int64
}

// NewMem returns a zeroed in-memory device of size bytes. With logicalBlock > 0 it behaves
// as a Direct device of that logical block size (offsets and lengths must be multiples).
func NewMem(size int64, logicalBlock int) *Mem {
	return &Mem{
		data: make([]byte, size),
		info: Info{
			Path:         "mem:",
			Kind:         KindMemory,
			Size:         size,
			LogicalBlock: max(logicalBlock, 1),
			Direct:       logicalBlock > 0,
			Handles:      8,
			Deallocate:   true,
		},
	}
}

// Info implements Device.
func (m *Mem) Info() Info { return m.info }

// VectoredWrites implements VectoredWriter.
func (m *Mem) VectoredWrites() bool { return true }

// Submit implements Device.
func (m *Mem) Submit(ops []Op) error {
	var first error
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, nil
		if err := CheckOp(m.info, op); err != nil {
			op.Err = err
		} else {
			if op.Write {
				m.mu.Lock()
				if m.closed {
					op.Err = fmt.Errorf("mem device: closed")
				} else {
					op.N = copy(m.data[op.Off:], op.Buf)
					op.N += copy(m.data[op.Off+int64(op.N):], op.Tail)
					m.writes++
					m.writeBytes += int64(op.N)
				}
				m.mu.Unlock()
			} else {
				m.mu.Lock()
				if m.closed {
					op.Err = fmt.Errorf("mem device: closed")
				} else {
					op.N = copy(op.Buf, m.data[op.Off:op.Off+int64(len(op.Buf))])
					m.reads++
					m.readBytes += int64(op.N)
				}
				m.mu.Unlock()
			}
		}
		if op.Err != nil && first == nil {
			first = op.Err
		}
	}
	return first
}

// Deallocate implements Device: the ranges read back as zeroes.
func (m *Mem) Deallocate(ranges []Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range ranges {
		if r.Off < 0 || r.Len < 0 || r.Off+r.Len > m.info.Size {
			return fmt.Errorf("%w: deallocate [%d, %d)", ErrOutOfRange, r.Off, r.Off+r.Len)
		}
		clear(m.data[r.Off : r.Off+r.Len])
		m.deallocs++
	}
	return nil
}

// Flush implements Device.
func (m *Mem) Flush() error {
	m.mu.Lock()
	m.flushes++
	m.mu.Unlock()
	return nil
}

// Close implements Device. The contents stay readable through Bytes.
func (m *Mem) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Reopen returns a new open Mem sharing this one's contents (a "restart" in tests).
func (m *Mem) Reopen() *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return &Mem{data: m.data, info: m.info}
}

// Bytes returns the backing memory (tests may corrupt it directly).
func (m *Mem) Bytes() []byte { return m.data }

// Counters returns operation counts.
func (m *Mem) Counters() MemCounters {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return MemCounters{m.writes, m.reads, m.deallocs, m.flushes, m.writeBytes, m.readBytes}
}
