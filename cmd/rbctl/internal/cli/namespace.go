package cli

// How commands that open an existing cache learn its key namespace and checkpoint format,
// and when they refuse to write: the namespace and format come from the checkpoint
// recovery chooses (engine.Detect); --namespace speaks when nothing on the device can.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// rbCacheOpts are the choices of a command that opens an existing cache: --namespace, and
// for recover the command's context and whether it takes a doubtful or lossy checkpoint
// choice upon itself (it reports the choice and decides whether to write).
type rbCacheOpts struct {
	namespace string
	ctx       context.Context
	accept    bool
}

func (o *rbCacheOpts) addNamespace(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.namespace, "namespace", "", "key namespace (object or legacy) for a cache whose checkpoint cannot tell, such as an empty LMCache v1 one; it must agree with what the checkpoint or slot headers show")
}

// detect reads the layout, namespace and format of the checkpoint recovery will choose.
// A writer is refused when nothing tells the namespace and --namespace is not given: a
// guess would put the wrong slot identity into every slot header it writes.
func (o *rbCacheOpts) detect(dev blockdev.Device, readOnly bool) (engine.Config, error) {
	d, err := engine.Detect(dev)
	if err != nil {
		return d.Config, err
	}
	cfg, sel := d.Config, d.Selection
	given := strings.TrimSpace(o.namespace)
	switch {
	case given != "":
		ns := engine.Namespace(given)
		if ns != engine.NamespaceObject && ns != engine.NamespaceLegacy {
			return cfg, fmt.Errorf("--namespace %s: want object or legacy", rbEscape(given))
		}
		if sel.NamespaceSource != "" && sel.Namespace != ns {
			return cfg, fmt.Errorf("--namespace %s: the cache uses the %s namespace (from %s); drop --namespace", ns, sel.Namespace, sel.NamespaceSource)
		}
		cfg.Namespace = ns
	case sel.NamespaceSource == "" && !readOnly:
		return cfg, errors.New("the checkpoint does not record the key namespace and has no keys that tell it (an empty LMCache v1 checkpoint); pass --namespace object (LMCache MP mode) or --namespace legacy (LMCache's non-MP backend)")
	}
	// A writer must not silently replace a newer checkpoint it could not use.
	if !readOnly && !o.accept && sel.Fallback && !sel.Doubt && (!sel.LostKnown || sel.Lost > 0) {
		return cfg, fmt.Errorf("%s; %s, and writing would replace it: run rbctl recover to accept that (rbctl inspect shows both containers)", rbEscape(sel.Reason), rbLostText(sel))
	}
	return cfg, nil
}

// open recovers the cache. A command that writes is refused when the checkpoint choice is
// in doubt, unless it takes the choice upon itself (recover): writing replaces the other
// container.
func (o *rbCacheOpts) open(dev blockdev.Device, cfg engine.Config) (*engine.Engine, error) {
	e, err := engine.OpenWith(dev, cfg, engine.OpenOptions{Context: o.ctx, AcceptDoubt: o.accept})
	if errors.Is(err, engine.ErrSelectionDoubt) {
		return nil, fmt.Errorf("%w; rbctl inspect shows both containers, rbctl recover --force continues from the one chosen", err)
	}
	return e, err
}

// rbLostText says what a fallback lost, about the rejected container.
func rbLostText(sel engine.Selection) string {
	switch {
	case !sel.Fallback:
		return "nothing lost"
	case !sel.LostKnown:
		return "the keys it held are unknown (it cannot be read)"
	case sel.Lost == 0:
		return "it holds no key the chosen checkpoint lacks"
	}
	noun := "keys"
	if sel.Lost == 1 {
		noun = "key"
	}
	return fmt.Sprintf("it holds %d %s the chosen checkpoint lacks (%s)", sel.Lost, noun, rbLostSample(sel))
}

func rbLostSample(sel engine.Selection) string {
	s := make([]string, len(sel.LostSample))
	for i, k := range sel.LostSample {
		s[i] = rbEscape(k)
	}
	if sel.Lost > len(s) {
		s = append(s, "...")
	}
	return strings.Join(s, ", ")
}

// rbChoiceJSON is the checkpoint choice in --json output (inspect, recover).
type rbChoiceJSON struct {
	Container       int               `json:"container"`
	Seq             uint64            `json:"seq"`
	Reason          string            `json:"reason"`
	Doubt           bool              `json:"in_doubt"`
	Fallback        bool              `json:"fallback"`
	LostKeys        *int              `json:"lost_keys"` // null: unknown, or no fallback
	LostKnown       bool              `json:"lost_keys_known"`
	LostSample      []string          `json:"lost_keys_sample,omitempty"`
	MixedFormats    bool              `json:"mixed_formats"`
	Namespace       string            `json:"namespace"`
	NamespaceSource string            `json:"namespace_source"` // "": nothing on the device tells
	Candidates      []rbCandidateJSON `json:"candidates"`
}

type rbCandidateJSON struct {
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

func rbChoiceOf(sel engine.Selection) rbChoiceJSON {
	j := rbChoiceJSON{Container: sel.Container, Seq: sel.Seq, Reason: sel.Reason, Doubt: sel.Doubt, Fallback: sel.Fallback,
		LostKnown: sel.LostKnown, MixedFormats: sel.MixedFormats, Namespace: string(sel.Namespace), NamespaceSource: sel.NamespaceSource}
	if sel.Fallback && sel.LostKnown {
		n := sel.Lost
		j.LostKeys = &n
	}
	for _, k := range sel.LostSample {
		j.LostSample = append(j.LostSample, rbEscape(k))
	}
	for _, c := range sel.Candidates {
		j.Candidates = append(j.Candidates, rbCandidateJSON{Container: c.Container, Usable: c.Usable, HeaderSeq: c.HeaderSeq, Seq: c.Seq,
			SeqSource: c.SeqSource, SeqNote: c.SeqNote, Format: string(c.Format), Entries: c.Entries, NextSlot: c.NextSlot,
			Namespace: string(c.Namespace), Stale: c.Stale, Problem: c.Problem})
	}
	return j
}

// rbChoiceLines renders the checkpoint choice for humans: which, why, what was lost.
func rbChoiceLines(sel engine.Selection) []string {
	if sel.Container < 0 {
		return []string{"checkpoint: none usable (" + rbEscape(sel.Reason) + ")"}
	}
	out := []string{fmt.Sprintf("checkpoint: container %d, seq %d: %s", sel.Container, sel.Seq, rbEscape(sel.Reason))}
	switch {
	case sel.Fallback && !sel.LostKnown:
		out = append(out, "fallback: keys lost: unknown (the rejected container cannot be read)")
	case sel.Fallback && sel.Lost > 0:
		out = append(out, fmt.Sprintf("fallback: keys lost: %d (%s)", sel.Lost, rbLostSample(sel)))
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
