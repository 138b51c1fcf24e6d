package placement

// Seeder is implemented by policies whose salt → handle assignment can be restored, e.g.
// from the handles recorded with a cache's entries after a restart, so that a salt keeps
// writing to the handle its older data is on.
type Seeder interface {
	// Seed records that salt's data is on handle h. It returns false when the policy keeps
	// its own answer (the salt is already assigned, or h is not one of its handles).
	Seed(salt string, h Handle) bool
}

// Seed forwards to p if p is a Seeder (compositions forward to their parts); false
// otherwise.
func Seed(p Policy, salt string, h Handle) bool {
	if s, ok := p.(Seeder); ok {
		return s.Seed(salt, h)
	}
	return false
}

// Seed assigns salt to handle h unless salt already has a handle; as if salt had been seen
// first with that outcome. A seeded handle counts as taken for later first-seen salts.
func (p *cacheSaltAssign) Seed(salt string, h Handle) bool {
	if h < 0 || int(h) >= p.n {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := *p.snap.Load()
	if _, ok := snap[salt]; ok {
		return false
	}
	if _, ok := p.salts.Load(salt); ok {
		return false
	}
	if p.assigned >= MaxAssignedSalts {
		return false
	}
	p.record(snap, salt, int(h))
	return true
}

// Seed forwards data handles to the inner policy; the metadata handle is not a salt's.
func (p *metadataClass) Seed(salt string, h Handle) bool {
	if p.inner == nil || int(h) == p.meta {
		return false
	}
	return Seed(p.inner, salt, h)
}
