package ftl

import "fmt"

// Precondition is the state the logical space starts in before a workload.
type Precondition int

const (
	// Fresh: every logical unit deallocated (a new or fully trimmed drive). New gives this.
	Fresh Precondition = iota
	// Sequential: every logical unit written once in LBA order through handle 0, as a drive
	// that held old data. Raises no-placement WAF of a later partial-range workload by more
	// than 2× compared with Fresh, because the old data must be relocated by GC.
	Sequential
)

func (p Precondition) String() string {
	switch p {
	case Fresh:
		return "fresh"
	case Sequential:
		return "sequential"
	}
	return fmt.Sprintf("Precondition(%d)", int(p))
}

// ParsePrecondition accepts "fresh" (or "trim", "none") and "sequential" (or "fill", "seq").
func ParsePrecondition(s string) (Precondition, error) {
	switch s {
	case "fresh", "trim", "none", "":
		return Fresh, nil
	case "sequential", "fill", "seq":
		return Sequential, nil
	}
	return 0, fmt.Errorf("ftl: unknown precondition %q; known: fresh, sequential", s)
}

// Precondition brings the model into state p. The writes count in Stats; start a Window
// afterwards to exclude them.
func (m *Model) Precondition(p Precondition) error {
	switch p {
	case Fresh:
		m.Deallocate(0, m.LogicalUnits())
		return nil
	case Sequential:
		return m.FillSequential()
	}
	return fmt.Errorf("ftl: unknown precondition %d", int(p))
}

// FillSequential writes every logical unit once, in order, through handle 0.
func (m *Model) FillSequential() error {
	const chunk = 1 << 16
	n := m.LogicalUnits()
	for lba := int64(0); lba < n; lba += chunk {
		if err := m.Write(lba, min(chunk, n-lba), 0); err != nil {
			return err
		}
	}
	return nil
}

// UnmarshalText parses a precondition name (ParsePrecondition).
func (p *Precondition) UnmarshalText(b []byte) error { return unmarshal(p, b, ParsePrecondition) }
