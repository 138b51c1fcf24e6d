package cachereport

import (
	"fmt"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// Choice is the checkpoint recovery chose, and why, as JSON (inspect, recover).
type Choice struct {
	Container       int         `json:"container"`
	Seq             uint64      `json:"seq"`
	Reason          string      `json:"reason"`
	Doubt           bool        `json:"in_doubt"`
	Fallback        bool        `json:"fallback"`
	LostKeys        *int        `json:"lost_keys"` // null: unknown, or no fallback
	LostKnown       bool        `json:"lost_keys_known"`
	LostSample      []string    `json:"lost_keys_sample,omitempty"`
	MixedFormats    bool        `json:"mixed_formats"`
	Namespace       string      `json:"namespace"`
	NamespaceSource string      `json:"namespace_source"` // "": nothing on the device tells
	Candidates      []Candidate `json:"candidates"`
}

// Candidate is one metadata container as the choice judged it.
type Candidate struct {
	Container int    `json:"container"`
	Usable    bool   `json:"usable"`
	HeaderSeq uint64 `json:"header_seq"`
	Seq       uint64 `json:"seq"`
	SeqSource string `json:"seq_source"`
	SeqNote   string `json:"seq_note,omitempty"`
	Format    string `json:"format,omitempty"`
	Entries   int    `json:"entries"` // -1: the payload does not decode
	NextSlot  int64  `json:"next_slot"`
	Namespace string `json:"namespace,omitempty"`
	Stale     int    `json:"stale_entries"` // -1: not checked
	Problem   string `json:"problem,omitempty"`
}

// ChoiceOf describes sel; the lost-key sample is escaped.
func ChoiceOf(sel engine.Selection) Choice {
	j := Choice{Container: sel.Container, Seq: sel.Seq, Reason: sel.Reason, Doubt: sel.Doubt, Fallback: sel.Fallback,
		LostKnown: sel.LostKnown, MixedFormats: sel.MixedFormats, Namespace: string(sel.Namespace), NamespaceSource: sel.NamespaceSource}
	if sel.Fallback && sel.LostKnown {
		n := sel.Lost
		j.LostKeys = &n
	}
	for _, k := range sel.LostSample {
		j.LostSample = append(j.LostSample, reports.Escape(k))
	}
	for _, c := range sel.Candidates {
		j.Candidates = append(j.Candidates, Candidate{Container: c.Container, Usable: c.Usable, HeaderSeq: c.HeaderSeq, Seq: c.Seq,
			SeqSource: c.SeqSource, SeqNote: c.SeqNote, Format: string(c.Format), Entries: c.Entries, NextSlot: c.NextSlot,
			Namespace: string(c.Namespace), Stale: c.Stale, Problem: c.Problem})
	}
	return j
}

// ChoiceLines renders the checkpoint choice for people: which, why, what was lost.
func ChoiceLines(sel engine.Selection) []string {
	if sel.Container < 0 {
		return []string{"checkpoint: none usable (" + reports.Escape(sel.Reason) + ")"}
	}
	out := []string{fmt.Sprintf("checkpoint: container %d, seq %d: %s", sel.Container, sel.Seq, reports.Escape(sel.Reason))}
	switch {
	case sel.Fallback && !sel.LostKnown:
		out = append(out, "fallback: keys lost: unknown (the rejected container cannot be read)")
	case sel.Fallback && sel.Lost > 0:
		out = append(out, fmt.Sprintf("fallback: keys lost: %d (%s)", sel.Lost, LostSample(sel)))
	case sel.Fallback:
		out = append(out, "fallback: keys lost: 0")
	}
	if sel.Doubt {
		out = append(out, "in doubt: nothing checksummed tells which container is newer; writing replaces the other one")
	}
	for _, c := range sel.Candidates {
		if c.SeqNote != "" {
			out = append(out, fmt.Sprintf("container %d: %s", c.Container, c.SeqNote))
		}
	}
	ns := "namespace " + string(sel.Namespace) + " (from " + sel.NamespaceSource + ")"
	if sel.NamespaceSource == "" {
		ns = "namespace: nothing on the device tells it (an empty LMCache v1 checkpoint); writers need --namespace"
	}
	return append(out, ns)
}

// LostSample lists (escaped) the sample of keys a fallback lost, "..." when there are more.
func LostSample(sel engine.Selection) string {
	s := make([]string, len(sel.LostSample))
	for i, k := range sel.LostSample {
		s[i] = reports.Escape(k)
	}
	if sel.Lost > len(s) {
		s = append(s, "...")
	}
	return strings.Join(s, ", ")
}
