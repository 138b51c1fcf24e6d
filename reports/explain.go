package reports

import (
	"fmt"
	"io"
	"strings"
)

// Explanation is one run's WAF by cause (rbctl simulate --explain): WAF − 1 split into the
// parts that counterfactual runs of the same workload remove, step by step from the run's
// configuration toward an ideal, plus what is left. Every figure is modelled.
type Explanation struct {
	Policy    string  `json:"policy"`
	Admission string  `json:"admission,omitempty"`
	WAF       float64 `json:"waf"`    // the run's modelled WAF (measured window)
	Method    string  `json:"method"` // "sequential" or "shapley"
	// Steps in the order they were applied (sequential) or listed (shapley). Their Parts and
	// Residual add up to WAF − 1.
	Steps    []ExplainStep `json:"steps"`
	Residual float64       `json:"residual"` // WAF − 1 left after every step: the WAF of the last configuration − 1
	// MixedRelocated is the part of WAF − 1 the model counted directly: bytes GC relocated
	// out of reclaim units that held more than one handle's data, over host bytes. It is a
	// second view of the same WAF, not a term of the sum.
	MixedRelocated float64 `json:"mixed_relocated"`
	// Sensitivity: counterfactuals that move away from the ideal (RU doubled), each alone.
	Sensitivity []ExplainStep `json:"sensitivity,omitempty"`
	Runs        int           `json:"runs"` // counterfactual runs made
	// Note says how the counterfactuals were made when it is not by plain runs (bench).
	Note string `json:"note,omitempty"`
	// Combos (shapley): the WAF of every combination of the applied changes, a plain run each.
	Combos []ExplainCombo `json:"combos,omitempty"`
}

// ExplainCombo is one combination of changes and the modelled WAF with them.
type ExplainCombo struct {
	Changes []string `json:"changes"`
	WAF     float64  `json:"waf"`
}

// ExplainTarget is the WAF the explanation names the smallest change set for.
const ExplainTarget = 1.05

// Smallest returns the fewest changes (lowest WAF among equals) whose run reaches target,
// from the combinations that ran (shapley) or else the single changes and the sequential
// steps; ok is false when none does.
func (e Explanation) Smallest(target float64) (changes []string, waf float64, ok bool) {
	try := func(c []string, w float64) {
		if w <= target && (!ok || len(c) < len(changes) || (len(c) == len(changes) && w < waf)) {
			changes, waf, ok = c, w, true
		}
	}
	for _, c := range e.Combos {
		try(c.Changes, c.WAF)
	}
	var upto []string
	for _, s := range e.Steps {
		if s.Skipped != "" {
			continue
		}
		upto = append(upto[:len(upto):len(upto)], s.Change)
		if s.Alone != nil {
			try([]string{s.Change}, *s.Alone)
		}
		if s.After != nil {
			try(upto, *s.After)
		}
	}
	for _, s := range e.Sensitivity {
		if s.Alone != nil {
			try(strings.Fields(s.Change), *s.Alone)
		}
	}
	return changes, waf, ok
}

func smallestLine(e Explanation) string {
	c, w, ok := e.Smallest(ExplainTarget)
	if !ok {
		return fmt.Sprintf("no change set tried reaches WAF ≤ %.2f", ExplainTarget)
	}
	if len(c) == 0 {
		return fmt.Sprintf("the run is at WAF ≤ %.2f already", ExplainTarget)
	}
	return fmt.Sprintf("smallest change set tried that reaches WAF ≤ %.2f: %s (modelled WAF %s)", ExplainTarget, strings.Join(c, " "), f3(w))
}

// ExplainStep is one cause: the change that removes it and what the model gives with it.
type ExplainStep struct {
	Cause  string `json:"cause"`
	Change string `json:"change"` // the setting, as simulate's flags spell it
	// Part of WAF − 1 attributed to the cause: sequential, the WAF before the step minus
	// the WAF after it; shapley, the mean of that over every order of the steps.
	Part float64 `json:"part"`
	// Alone is the WAF of a plain run with only this change; After the WAF with this and
	// every earlier step (sequential only, else null).
	Alone *float64 `json:"waf_alone"`
	After *float64 `json:"waf_after"`
	// Skipped says why a step was not applied (the run already has the setting, or the
	// change is infeasible on this device); it then has no part.
	Skipped string `json:"skipped,omitempty"`
}

// ExplainCaveat is printed next to every decomposition.
const ExplainCaveat = "Causes interact: a part is what its change removes after the steps above it (sequential) " +
	"or averaged over every order (shapley), not what it removes alone (the 'alone' column). " +
	"All figures are modelled (FTL model), not measured on a drive."

func explainRows(e Explanation) ([]string, [][]string) {
	h := []string{"cause", "change", "share of WAF−1", "part", "WAF alone (modelled)"}
	if e.Method == "sequential" {
		h = append(h, "WAF after (modelled)")
	}
	total := e.WAF - 1
	share := func(p float64) string {
		if total <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*p/total)
	}
	var rows [][]string
	for _, s := range e.Steps {
		row := []string{s.Cause, s.Change, share(s.Part), f3(s.Part), optF(s.Alone, f3)}
		if s.Skipped != "" {
			row[2], row[3] = "-", "skipped: "+s.Skipped
		}
		if e.Method == "sequential" {
			row = append(row, optF(s.After, f3))
		}
		rows = append(rows, row)
	}
	last := []string{"remaining (no listed change removes it)", "-", share(e.Residual), f3(e.Residual), "-"}
	if e.Method == "sequential" {
		last = append(last, "-")
	}
	rows = append(rows, last)
	for _, s := range e.Sensitivity {
		row := []string{s.Cause, s.Change, "(not in the sum)", "-", optF(s.Alone, f3)}
		if s.Skipped != "" {
			row[3] = "skipped: " + s.Skipped
		}
		if e.Method == "sequential" {
			row = append(row, "-")
		}
		rows = append(rows, row)
	}
	return h, rows
}

func explainTitle(e Explanation) string {
	name := e.Policy
	if e.Admission != "" {
		name += " [" + e.Admission + "]"
	}
	return fmt.Sprintf("WAF by cause, %s: modelled WAF %s, WAF − 1 = %s (%s attribution, %d counterfactual runs); "+
		"relocated out of RUs holding several handles' data, counted by the model: %s of WAF − 1",
		name, f3(e.WAF), f3(e.WAF-1), e.Method, e.Runs, f3(e.MixedRelocated))
}

// explainTables writes every explanation as a titled table, then the caveat.
func explainTables(w io.Writer, r *Report, md bool) error {
	for _, e := range r.Explain {
		h, rows := explainRows(e)
		if md {
			fmt.Fprintf(w, "\n%s\n\n| %s |\n|%s\n", explainTitle(e), strings.Join(h, " | "), strings.Repeat("---|", len(h)))
			for _, row := range rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
			fmt.Fprintf(w, "\n%s\n", smallestLine(e))
			if e.Note != "" {
				fmt.Fprintf(w, "\n%s\n", e.Note)
			}
			continue
		}
		if err := WriteWrapped(w, explainTitle(e)); err != nil {
			return err
		}
		if err := renderTable(w, h, rows); err != nil {
			return err
		}
		if err := WriteWrapped(w, smallestLine(e)); err != nil {
			return err
		}
		if e.Note != "" {
			if err := WriteWrapped(w, e.Note); err != nil {
				return err
			}
		}
	}
	if len(r.Explain) == 0 {
		return nil
	}
	if md {
		_, err := fmt.Fprintf(w, "\n_%s_\n", ExplainCaveat)
		return err
	}
	return WriteWrapped(w, ExplainCaveat)
}

// Brief is an error's first line without its parenthesised detail: a reason that fits a
// table cell.
func Brief(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	var b strings.Builder
	depth := 0
	for _, c := range s {
		switch {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	return strings.NewReplacer(" ;", ";", " ,", ",", " .", ".").Replace(out)
}
