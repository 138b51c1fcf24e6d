package ftl

// Closed RUs of each reclaim group sit in doubly linked lists bucketed by valid count, so a
// greedy victim is found by walking up from minValid (amortised O(1): minValid only moves
// down by one per invalidation) and a valid-count change is an O(1) move between buckets.

func (m *Model) bucket(g, v int32) int { return int(g)*int(m.u+1) + int(v) }

func (m *Model) link(ru, g, v int32) {
	b := m.bucket(g, v)
	h := m.heads[b]
	m.ruPrev[ru] = noRU
	m.ruNext[ru] = h
	if h != noRU {
		m.ruPrev[h] = ru
	}
	m.heads[b] = ru
}

func (m *Model) unlink(ru, g, v int32) {
	p, n := m.ruPrev[ru], m.ruNext[ru]
	if p != noRU {
		m.ruNext[p] = n
	} else {
		m.heads[m.bucket(g, v)] = n
	}
	if n != noRU {
		m.ruPrev[n] = p
	}
}

// close moves an open RU (full or closed early) into the GC candidate buckets.
func (m *Model) close(ru int32) {
	g := ru / m.rpg
	v := m.ruValid[ru]
	m.ruState[ru] = ruClosed
	m.nClosed++
	m.ruClosedAt[ru] = m.clock
	m.link(ru, g, v)
	if v < m.minValid[g] {
		m.minValid[g] = v
	}
}

func (m *Model) popFree(g int) int32 {
	ru := m.freeHead[g]
	m.freeHead[g] = m.ruNext[ru]
	m.freeCount[g]--
	m.ruState[ru] = ruOpen
	m.ruWP[ru] = 0
	m.ruValid[ru] = 0
	m.ruFirst[ru] = noRU
	m.ruMixed[ru] = false
	return ru
}

// allocHost opens a new RU for host writes of handle h in group g, running GC first until
// more than the reserve is free.
func (m *Model) allocHost(g, h int) (int32, error) {
	for m.freeCount[g] <= m.cfg.reserve {
		if err := m.reclaim(g); err != nil {
			return noRU, err
		}
	}
	ru := m.popFree(g)
	m.ruOwner[ru] = int32(h)
	return ru, nil
}

// pickVictim returns a closed RU of group g whose reclaim frees space (valid < RU size), or
// noRU if there is none.
func (m *Model) pickVictim(g int32) int32 {
	if m.cfg.GC == CostBenefit {
		return m.pickCostBenefit(g)
	}
	return m.pickGreedy(g)
}

func (m *Model) pickGreedy(g int32) int32 {
	for v := m.minValid[g]; v < int32(m.u); v++ {
		if ru := m.heads[m.bucket(g, v)]; ru != noRU {
			m.minValid[g] = v
			return ru
		}
	}
	m.minValid[g] = int32(m.u)
	return noRU
}

func (m *Model) pickCostBenefit(g int32) int32 {
	best, bestScore := noRU, -1.0
	u := float64(m.u)
	for ru := g * m.rpg; ru < (g+1)*m.rpg; ru++ {
		if m.ruState[ru] != ruClosed || m.ruValid[ru] >= int32(m.u) {
			continue
		}
		f := float64(m.ruValid[ru]) / u
		age := float64(m.clock-m.ruClosedAt[ru]) + 1
		if s := (1 - f) * age / (1 + f); s > bestScore {
			best, bestScore = ru, s
		}
	}
	return best
}

// gcSlot is the gcDest index for data owned by owner in group g.
func (m *Model) gcSlot(g int, owner int32) int {
	if owner >= 0 && m.cfg.iso[owner] == PersistentlyIsolated {
		return g*(m.nh+1) + 1 + int(owner)
	}
	return g * (m.nh + 1) // shared destination
}

// reclaim collects one victim in group g: relocates its valid units to the matching GC
// destination, then erases it.
func (m *Model) reclaim(g int) error {
	victim := m.pickVictim(int32(g))
	if victim == noRU {
		return ErrInfeasible
	}
	v := m.ruValid[victim]
	slot := m.gcSlot(g, m.ruOwner[victim])
	dest := m.gcDest[slot]
	room := int64(m.freeCount[g]) * int64(m.u)
	if dest != noRU {
		room += int64(m.u) - int64(m.ruWP[dest])
	}
	if int64(v) > room && m.cfg.GC == CostBenefit {
		// The best-scoring victim does not fit; the emptiest one is the last chance.
		if alt := m.pickGreedy(int32(g)); alt != noRU && m.ruValid[alt] < v {
			victim, v = alt, m.ruValid[alt]
			slot = m.gcSlot(g, m.ruOwner[victim])
			dest = m.gcDest[slot]
			room = int64(m.freeCount[g]) * int64(m.u)
			if dest != noRU {
				room += int64(m.u) - int64(m.ruWP[dest])
			}
		}
	}
	if int64(v) > room {
		return ErrInfeasible
	}
	m.unlink(victim, int32(g), v)
	m.ruState[victim] = ruOpen // out of the buckets while being emptied
	m.nClosed--
	owner := int32(sharedGC)
	if slot != g*(m.nh+1) {
		owner = m.ruOwner[victim]
	}
	u := m.u
	base := uint32(victim) * u
	wp := uint32(m.ruWP[victim])
	moved := uint64(0)
	for off := uint32(0); off < wp && m.ruValid[victim] > 0; off++ {
		p := base + off
		lu := m.p2l[p]
		if m.l2p[lu] != p {
			continue // stale: overwritten or deallocated since
		}
		if dest == noRU {
			dest = m.popFree(g)
			m.ruOwner[dest] = owner
			m.gcDest[slot] = dest
		}
		dwp := m.ruWP[dest]
		np := uint32(dest)*u + uint32(dwp)
		m.p2l[np] = lu
		m.l2p[lu] = np
		m.ruValid[dest]++
		m.ruWP[dest] = dwp + 1
		m.ruValid[victim]--
		if m.lbaHandle != nil {
			lh := int32(m.lbaHandle[lu])
			hc := &m.hs[lh]
			hc.relocated += m.mu
			hc.media += m.mu
			// Host RUs hold one handle's data; only a GC destination shared by initially
			// isolated handles can mix them.
			if f := m.ruFirst[dest]; f == noRU {
				m.ruFirst[dest] = lh
			} else if f != lh {
				m.ruMixed[dest] = true
			}
		}
		moved++
		if uint32(dwp+1) == u {
			m.close(dest)
			dest = noRU
			m.gcDest[slot] = noRU
		}
	}
	m.st.media += moved * m.mu
	m.st.relocated += moved * m.mu
	if m.ruMixed[victim] {
		m.st.mixed += moved * m.mu
	}
	if m.lbaHandle == nil {
		m.hs[0].relocated += moved * m.mu
		m.hs[0].media += moved * m.mu
	}
	m.st.erased += uint64(m.cfg.RUBytes)
	m.st.gcRuns++
	// Erase: back on the free stack.
	m.ruState[victim] = ruFree
	m.ruValid[victim] = 0
	m.ruWP[victim] = 0
	m.ruNext[victim] = m.freeHead[g]
	m.freeHead[g] = victim
	m.freeCount[g]++
	return nil
}
