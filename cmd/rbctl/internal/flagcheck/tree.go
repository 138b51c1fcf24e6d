package flagcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Lookup finds the rule of flag f of cmd (false: the flag has none).
type Lookup func(cmd *cobra.Command, f *pflag.Flag) (Rule, bool)

// Validate checks every flag of cmd against its rule, and each ZeroNeeds pairing; it
// returns the first violation.
func Validate(cmd *cobra.Command, rules Lookup) error {
	var first error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		r, ok := rules(cmd, f)
		if !ok || first != nil {
			return
		}
		if err := r.Check(f); err != nil {
			first = err
			return
		}
		if r.ZeroNeeds != "" && IsZero(f) {
			if o := cmd.Flags().Lookup(r.ZeroNeeds); o != nil && IsZero(o) {
				first = fmt.Errorf("--%s 0 needs --%s > 0 (otherwise the run never ends)", f.Name, r.ZeroNeeds)
			}
		}
	})
	return first
}

// Walk calls fn for every command under root (root included), in command-tree order.
func Walk(root *cobra.Command, fn func(*cobra.Command)) {
	fn(root)
	for _, c := range root.Commands() {
		Walk(c, fn)
	}
}

// RulesMarkdown renders one row per (flag, range) with the commands that share it.
func RulesMarkdown(root *cobra.Command, rules Lookup) string {
	uses := map[string][]string{}
	Walk(root, func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if r, ok := rules(c, f); ok && r.Kind != Any {
				key := f.Name + "\x00" + r.RangeText()
				uses[key] = append(uses[key], strings.TrimPrefix(c.CommandPath(), root.Name()+" "))
			}
		})
	})
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| flag | commands | accepted values |\n|---|---|---|\n")
	for _, k := range keys {
		name, rng, _ := strings.Cut(k, "\x00")
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", name, strings.Join(uses[k], ", "), cell(rng))
	}
	return b.String()
}

// FlagsMarkdown renders every flag of every visible command (local flags, hidden flags and
// hidden commands left out): name, shorthand, type, default, rule and help, one table.
func FlagsMarkdown(root *cobra.Command, rules Lookup) string {
	var b strings.Builder
	b.WriteString("| command | flag | short | type | default | accepted values | help |\n|---|---|---|---|---|---|---|\n")
	Walk(root, func(c *cobra.Command) {
		if hiddenPath(c) {
			return
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			short, def, rng := "", f.DefValue, ""
			if f.Shorthand != "" {
				short = "`-" + f.Shorthand + "`"
			}
			if r, ok := rules(c, f); ok && r.Kind != Any {
				rng = r.RangeText()
			}
			if def != "" {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| %s | `--%s` | %s | %s | %s | %s | %s |\n", c.CommandPath(), f.Name, short, f.Value.Type(), cell(def), cell(rng), cell(f.Usage))
		})
	})
	return b.String()
}

func hiddenPath(c *cobra.Command) bool {
	for ; c != nil; c = c.Parent() {
		if c.Hidden {
			return true
		}
	}
	return false
}

// cell escapes text for a markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
