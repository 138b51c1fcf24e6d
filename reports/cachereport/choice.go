package cachereport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbctl/rbctl/reports"
)

// Choice is the checkpoint recovery chose, and why, as JSON (inspect, recover).
type Choice struct {
	Container       int         `json:"container"`
	Seq             uint64      `json:"seq"`
	Reason          string      `json:"reason"`
	Doubt           bool        `json:"in_doubt"`
	Fallback        bool        `json:"fallback"`
	LostKeys        *int        `json:"lost_keys,omitempty"` // absent: unknown, or no fallback (lost_keys_known)
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
	Entries   *int   `json:"entries,omitempty"`   // absent: the payload does not decode
	NextSlot  *int64 `json:"next_slot,omitempty"` // absent with entries
	Namespace string `json:"namespace,omitempty"`
	Stale     *int   `json:"stale_entries,omitempty"` // absent: not checked
	Problem   string `json:"problem,omitempty"`
}

// lost is how many keys a fallback lost (0 unless known).
func (c Choice) lost() int {
	if c.LostKeys == nil {
		return 0
	}
	return *c.LostKeys
}

// Lines renders the checkpoint choice for people: which, why, what was lost.
func (c Choice) Lines() []string {
	if c.Container < 0 {
		return []string{"checkpoint: none usable (" + reports.Escape(c.Reason) + ")"}
	}
	out := []string{fmt.Sprintf("checkpoint: container %d, seq %d: %s", c.Container, c.Seq, reports.Escape(c.Reason))}
	switch {
	case c.Fallback && !c.LostKnown:
		out = append(out, "fallback: keys lost: unknown (the rejected container cannot be read)")
	case c.Fallback && c.lost() > 0:
		out = append(out, fmt.Sprintf("fallback: keys lost: %d (%s)", c.lost(), c.lostSample()))
	case c.Fallback:
		out = append(out, "fallback: keys lost: 0")
	}
	if c.Doubt {
		out = append(out, "in doubt: nothing checksummed tells which container is newer; writing replaces the other one")
	}
	for _, cd := range c.Candidates {
		if cd.SeqNote != "" {
			out = append(out, fmt.Sprintf("container %d: %s", cd.Container, cd.SeqNote))
		}
	}
	ns := "namespace " + c.Namespace + " (from " + c.NamespaceSource + ")"
	if c.NamespaceSource == "" {
		ns = "namespace: nothing on the device tells it (an empty LMCache v1 checkpoint); writers need --key-namespace"
	}
	return append(out, ns)
}

// lostSample lists the (escaped) sample of keys a fallback lost, "..." when there are more.
func (c Choice) lostSample() string {
	s := slices.Clone(c.LostSample)
	if c.lost() > len(s) {
		s = append(s, "...")
	}
	return strings.Join(s, ", ")
}

// LostText says in a clause what a fallback lost, about the rejected container ("it holds
// 2 keys the chosen checkpoint lacks (a, b)").
func (c Choice) LostText() string {
	switch {
	case !c.Fallback:
		return "nothing lost"
	case !c.LostKnown:
		return "the keys it held are unknown (it cannot be read)"
	case c.lost() == 0:
		return "it holds no key the chosen checkpoint lacks"
	}
	noun := "keys"
	if c.lost() == 1 {
		noun = "key"
	}
	return fmt.Sprintf("it holds %d %s the chosen checkpoint lacks (%s)", c.lost(), noun, c.lostSample())
}
