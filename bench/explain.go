package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
)

// WAF by cause in bench (--explain): the shadow model's input — every write and deallocate
// the engine issued, in the order the model saw them — is recorded, then replayed on fresh
// models with one device setting changed at a time (reports.Attribute). Only device-level
// causes can be replayed: a recorded stream fixes which slots the cache wrote and freed,
// so slot reuse, deallocation and eviction are simulate's (--explain there). Every figure
// is modelled.

// shadowOp is one recorded operation: a write of n bytes at off through handle h, or, for
// n < 0, a deallocate of −n bytes.
type shadowOp struct {
	off, n int64
	h      int32
}

// maxRecorded bounds a recording (24 bytes an op): beyond it the run is not explained.
const maxRecorded = 64 << 20

// Record starts recording what the model is fed.
func (s *ShadowDevice) Record() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording = true
}

func (s *ShadowDevice) record(off, n int64, h int) {
	if !s.recording {
		return
	}
	if len(s.rec) >= maxRecorded {
		s.recording, s.rec = false, nil
		return
	}
	s.rec = append(s.rec, shadowOp{off, n, int32(h)})
}

// setMark notes how many ops are recorded (called with every op held back: snapshot).
func (s *ShadowDevice) setMark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mark = len(s.rec)
}

// lastMark is the count setMark noted.
func (s *ShadowDevice) lastMark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mark
}

// recorded returns the ops recorded so far (nil if recording stopped at its bound) and
// whether the device records.
func (s *ShadowDevice) recorded() ([]shadowOp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, s.recording
}

// replay feeds ops to a fresh model of fc and returns its counters over ops[from:].
func replay(fc ftl.Config, ops []shadowOp, from int) (ftl.Stats, error) {
	if err := fc.CheckFeasible("the replayed model", ftl.Tunable{OP: true, OPMax: 0.9, RU: true}); err != nil {
		return ftl.Stats{}, err
	}
	m, err := ftl.New(fc)
	if err != nil {
		return ftl.Stats{}, err
	}
	var base ftl.Stats
	for i, op := range ops {
		if i == from {
			base = m.Stats()
		}
		if op.n < 0 {
			m.DeallocateBytes(op.off, -op.n)
			continue
		}
		if err := m.WriteBytes(op.off, op.n, int(op.h)); err != nil {
			return ftl.Stats{}, err
		}
	}
	if from >= len(ops) {
		base = m.Stats()
	}
	return m.Stats().Sub(base), nil
}

// benchLever is a device setting a replay can change.
type benchLever struct {
	cause  string
	change func(fc *ftl.Config, base ftl.Config) (flag, skip string)
}

var benchLevers = []benchLever{
	{"handles mixed by GC (initially isolated RUHs share a GC destination)", func(fc *ftl.Config, b ftl.Config) (string, string) {
		if b.Isolation == ftl.PersistentlyIsolated {
			return "", "already persistently isolated"
		}
		fc.Isolation = ftl.PersistentlyIsolated
		return "iso=persistent", ""
	}},
	{"slots reused across handles", func(*ftl.Config, ftl.Config) (string, string) {
		return "", "cache-level: a replay keeps the slots written (simulate --explain models it)"
	}},
	{"no deallocate on evict", func(*ftl.Config, ftl.Config) (string, string) {
		return "", "cache-level: a replay keeps the deallocates issued (simulate --explain models it)"
	}},
	{"per-chunk eviction (RUs partly live when GC needs them)", func(*ftl.Config, ftl.Config) (string, string) {
		return "", "cache-level: a replay keeps the evictions made (simulate --explain models it)"
	}},
	{"RU size against the eviction granule", func(fc *ftl.Config, b ftl.Config) (string, string) {
		fc.RUBytes, fc.RUsPerGroup = b.RUBytes/2, 0
		return "ru=" + units.FormatSpec(b.RUBytes/2), ""
	}},
	{"over-provisioning", func(fc *ftl.Config, b ftl.Config) (string, string) {
		fc.OP, fc.RUsPerGroup = math.Round(max(2*b.OP, b.OP+0.07)*100)/100, 0
		return "op=" + strconv.FormatFloat(fc.OP, 'f', -1, 64), ""
	}},
}

// explainReplay decomposes the WAF of a replay of sh's recording from the warm-up mark,
// on fc, by method.
func explainReplay(policy, method string, fc ftl.Config, ops []shadowOp, from int, runWAF float64) (*reports.Explanation, error) {
	st, err := replay(fc, ops, from)
	if err != nil {
		return nil, fmt.Errorf("replaying the recorded writes: %w", err)
	}
	e := &reports.Explanation{Policy: policy, WAF: st.WAF(), Method: method}
	if st.HostBytes > 0 {
		e.MixedRelocated = float64(st.MixedRelocatedBytes) / float64(st.HostBytes)
	}
	e.Note = fmt.Sprintf("bench: replays of the shadow model's recorded writes and deallocates on fresh models (changes as emu: spec parameters); "+
		"the replay as run gives %.3f, the run's shadow model %.3f", e.WAF, runWAF)
	if math.Abs(e.WAF-runWAF) >= 5e-4 {
		e.Note += " (it carried earlier policies' history: the parts add up to the replay's)"
	}
	for _, l := range benchLevers {
		scratch := fc
		flag, skip := l.change(&scratch, fc)
		e.Steps = append(e.Steps, reports.ExplainStep{Cause: l.cause, Change: flag, Skipped: skip})
	}
	waf := func(steps []int) (float64, error) {
		c := fc
		for _, i := range steps {
			benchLevers[i].change(&c, fc)
		}
		st, err := replay(c, ops, from)
		return st.WAF(), err
	}
	skip := func(_ int, err error) string {
		if errors.Is(err, ftl.ErrCannotReclaim) || errors.Is(err, ftl.ErrInfeasible) {
			return "infeasible here: " + reports.Brief(err)
		}
		return "not replayable: " + reports.Brief(err)
	}
	if err := reports.Attribute(e, waf, skip); err != nil {
		return nil, err
	}
	c := fc
	c.RUBytes, c.RUsPerGroup = 2*fc.RUBytes, 0
	s := reports.ExplainStep{Cause: "larger RU (sensitivity)", Change: "ru=" + units.FormatSpec(2*fc.RUBytes)}
	if st, err := replay(c, ops, from); err != nil {
		s.Skipped = "infeasible here"
	} else {
		s.Alone = reports.F64(st.WAF())
	}
	e.Sensitivity = append(e.Sensitivity, s)
	return e, nil
}
