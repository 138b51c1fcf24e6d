package placement

// metadataClass puts checkpoint/index metadata on the last handle (n-1), a dedicated
// long-lived handle, and hands data writes to an inner policy built for handles 0..n-2.
type metadataClass struct {
	meta  int
	inner Policy // nil: data goes to handle 0
}

// NewMetadataClass returns the policy reserving handle n-1 for metadata (n >= 2); inner
// places data writes and must only return handles below n-1 (or None). inner may be nil.
func NewMetadataClass(n int, inner Policy) Policy {
	return &metadataClass{meta: max(n-1, 0), inner: inner}
}

func (p *metadataClass) Place(w Write) Handle {
	if w.Metadata {
		return Handle(p.meta)
	}
	// Direct calls for the common inner policies avoid a second dynamic dispatch (and copy
	// of w) on the hot path.
	switch in := p.inner.(type) {
	case nil:
		return 0
	case *cacheSaltAssign:
		return in.Place(w)
	case cacheSaltHash:
		return in.Place(w)
	case *hotness:
		return in.Place(w)
	case *lifetime:
		return in.Place(w)
	default:
		return in.Place(w)
	}
}

func (p *metadataClass) Name() string {
	if p.inner == nil {
		return "metadata-class"
	}
	return "metadata-class+" + p.inner.Name()
}

// Observe forwards to the inner policy.
func (p *metadataClass) Observe(id uint64, ev Event) {
	if p.inner != nil {
		Observe(p.inner, id, ev)
	}
}
