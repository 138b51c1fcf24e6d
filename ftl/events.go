package ftl

// EventType uses the NVMe FDP event type codes (nvme-fdp-reference §2.3).
type EventType uint8

const (
	// EventRUNotFullyWritten (host event 0x00): an RU was closed by an RUH Update before it
	// was full.
	EventRUNotFullyWritten EventType = 0x00
	// EventMediaReallocated (controller event 0x80) is defined for callers that share the
	// type; the model has no media errors and never emits it.
	EventMediaReallocated EventType = 0x80
)

// maxEvents bounds the pending event queue; older events are dropped first.
const maxEvents = 4096

// Event is one FDP event the model raised.
type Event struct {
	Type           EventType
	Group, Handle  int
	UnwrittenBytes int64  // RU Not Fully Written: bytes left unwritten in the closed RU
	HostClock      uint64 // host mapping units written when it happened (model time)
}

func (m *Model) emit(e Event) {
	if len(m.events) == maxEvents {
		copy(m.events, m.events[1:])
		m.events = m.events[:maxEvents-1]
		m.dropped++
	}
	m.events = append(m.events, e)
}

// DrainEvents returns the events raised since the last call, oldest first. At most 4096 are
// kept; Stats().DroppedEvents counts the ones lost to that bound.
func (m *Model) DrainEvents() []Event {
	evs := m.events
	m.events = nil
	return evs
}
