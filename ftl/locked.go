package ftl

import "sync"

// Locked wraps a Model with a mutex for callers that feed it from several goroutines (the
// emulated SSD's queues). Each method is one critical section.
type Locked struct {
	mu sync.Mutex
	m  *Model
}

// NewLocked wraps m; m must not be used directly afterwards.
func NewLocked(m *Model) *Locked { return &Locked{m: m} }

// Do runs f with exclusive access to the model, for sequences that must be atomic.
func (l *Locked) Do(f func(m *Model)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l.m)
}

// Write is Model.Write under the lock.
func (l *Locked) Write(lba, units int64, handle int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Write(lba, units, handle)
}

// WriteGroup is Model.WriteGroup under the lock.
func (l *Locked) WriteGroup(lba, units int64, group, handle int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.WriteGroup(lba, units, group, handle)
}

// WriteBytes is Model.WriteBytes under the lock.
func (l *Locked) WriteBytes(off, n int64, handle int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.WriteBytes(off, n, handle)
}

// Deallocate is Model.Deallocate under the lock.
func (l *Locked) Deallocate(lba, units int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m.Deallocate(lba, units)
}

// DeallocateBytes is Model.DeallocateBytes under the lock.
func (l *Locked) DeallocateBytes(off, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m.DeallocateBytes(off, n)
}

// UpdateRUH is Model.UpdateRUH under the lock.
func (l *Locked) UpdateRUH(handle int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.UpdateRUH(handle)
}

// RUHStatus is Model.RUHStatus under the lock.
func (l *Locked) RUHStatus(group, handle int) (RUHStatus, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.RUHStatus(group, handle)
}

// Stats is Model.Stats under the lock.
func (l *Locked) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Stats()
}

// DrainEvents is Model.DrainEvents under the lock.
func (l *Locked) DrainEvents() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.DrainEvents()
}
