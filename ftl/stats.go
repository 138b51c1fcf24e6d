package ftl

// HandleStats are the counters of one reclaim unit handle.
type HandleStats struct {
	HostBytes      uint64 // written by the host through this handle
	MediaBytes     uint64 // host writes plus GC relocations of data last written through it
	RelocatedBytes uint64 // GC relocations of this handle's data
}

// Stats is a snapshot of the model's counters (exact, in bytes) and RU gauges.
type Stats struct {
	HostBytes      uint64 // HBMW
	MediaBytes     uint64 // MBMW = host + relocated
	ErasedBytes    uint64 // MBE: RUBytes per reclaimed RU
	RelocatedBytes uint64 // GC copies
	// MixedRelocatedBytes: the part of RelocatedBytes copied out of RUs that held data last
	// written through more than one handle (only the shared GC destination of initially
	// isolated handles can: host RUs and persistently isolated GC RUs hold one handle's).
	MixedRelocatedBytes uint64
	GCRuns              uint64 // RUs reclaimed
	DroppedEvents       uint64 // events lost because the pending queue was full

	Handles []HandleStats

	// Gauges (not differenced by Sub).
	ValidBytes int64 // mapped logical bytes
	TotalRUs   int
	FreeRUs    int
	OpenRUs    int // host and GC destinations
	ClosedRUs  int
}

// WAF is MediaBytes/HostBytes, or 0 when nothing was written.
func (s Stats) WAF() float64 {
	if s.HostBytes == 0 {
		return 0
	}
	return float64(s.MediaBytes) / float64(s.HostBytes)
}

// Sub returns the counters accumulated since base (an earlier snapshot of the same model);
// gauges are s's.
func (s Stats) Sub(base Stats) Stats {
	d := s
	d.HostBytes -= base.HostBytes
	d.MediaBytes -= base.MediaBytes
	d.ErasedBytes -= base.ErasedBytes
	d.RelocatedBytes -= base.RelocatedBytes
	d.MixedRelocatedBytes -= base.MixedRelocatedBytes
	d.GCRuns -= base.GCRuns
	d.DroppedEvents -= base.DroppedEvents
	d.Handles = make([]HandleStats, len(s.Handles))
	for i, h := range s.Handles {
		if i < len(base.Handles) {
			b := base.Handles[i]
			h.HostBytes -= b.HostBytes
			h.MediaBytes -= b.MediaBytes
			h.RelocatedBytes -= b.RelocatedBytes
		}
		d.Handles[i] = h
	}
	return d
}

// Stats returns the current counters; O(handles + reclaim groups).
func (m *Model) Stats() Stats {
	s := Stats{
		HostBytes:           m.st.host,
		MediaBytes:          m.st.media,
		ErasedBytes:         m.st.erased,
		RelocatedBytes:      m.st.relocated,
		MixedRelocatedBytes: m.st.mixed,
		GCRuns:              m.st.gcRuns,
		DroppedEvents:       m.dropped,
		Handles:             make([]HandleStats, m.nh),
		ValidBytes:          m.st.valid * int64(m.mu),
		TotalRUs:            int(m.nRUs),
	}
	for i, h := range m.hs {
		s.Handles[i] = HandleStats{HostBytes: h.host, MediaBytes: h.media, RelocatedBytes: h.relocated}
	}
	for _, f := range m.freeCount {
		s.FreeRUs += f
	}
	s.ClosedRUs = m.nClosed
	s.OpenRUs = s.TotalRUs - s.FreeRUs - s.ClosedRUs
	return s
}

// Window measures counters over an interval: take one after warm-up, read it at the end.
type Window struct {
	m    *Model
	base Stats
}

// Window starts a measurement window now.
func (m *Model) Window() Window { return Window{m: m, base: m.Stats()} }

// Stats returns the counters accumulated since the window started (WAF() of the result is
// the windowed WAF).
func (w Window) Stats() Stats { return w.m.Stats().Sub(w.base) }

// Start returns the snapshot the window started from.
func (w Window) Start() Stats { return w.base }
