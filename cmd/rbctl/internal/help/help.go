// Package help arranges rbctl's help by purpose: the commands under headings (a cache on a
// device, measuring, NVMe and FDP, peers), and the flags of a command with many of them in
// groups (device, drive model, placement, workload, output), so that bench's and simulate's
// fifty flags read as five short lists.
package help

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// commandGroups are the headings of rbctl's command list and the commands under each.
var commandGroups = []struct{ id, title, cmds string }{
	{"cache", "A cache on a device:", "format inspect recover put get ls rm"},
	{"measure", "Measuring placement:", "bench simulate cluster-bench torture"},
	{"nvme", "NVMe and FDP:", "fdp-status fdp identify nvme emu"},
	{"peers", "Peers sharing caches:", "serve remote"},
}

// flagGroups are the headings a long flag list is split under, in order; a flag in none of
// them is listed last under "Other flags".
var flagGroups = []struct{ title, flags string }{
	{"Device and layout", "create force io-engine queue-depth direct meta-bytes slot-bytes header-bytes block-align capacity namespace-id shard-by lmcache-config key-namespace compat checkpoint-interval slot-groups"},
	{"Drive model (FTL)", "device-size op ru unit handles isolation gc reserve precondition deallocate checkpoint-ops"},
	{"Placement, eviction, admission", "placement eviction region admission budgets replica-handle"},
	{"Workload and window", "workload model model-config bytes-per-token chunk-tokens max-context preset tenant tenants synthetic-tenants keys value-size read-frac read-only-frac theta rate speed requests duration warmup warmup-timeout measure workers seed trace-loops salt-by write-trace sweep util"},
	{"Output", "json csv markdown plot save quiet per-handle verbose"},
}

// groupAbove is how many flags a command has before its help groups them.
const groupAbove = 14

// Arrange sets the command headings and the grouped flag help on root.
func Arrange(root *cobra.Command) {
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range strings.Fields(g.cmds) {
			for _, c := range root.Commands() {
				if c.Name() == name {
					c.GroupID = g.id
				}
			}
		}
	}
	root.SetHelpCommandGroupID("")
	cobra.AddTemplateFunc("groupedFlags", GroupedFlags)
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"\n\nFlags:\n{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}", "{{groupedFlags .}}", 1))
}

// GroupedFlags is the Flags section of c's help: one list, or for a command with many
// flags, a list per group.
func GroupedFlags(c *cobra.Command) string {
	local := c.LocalFlags()
	n := 0
	local.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			n++
		}
	})
	if n <= groupAbove {
		return "\n\nFlags:\n" + strings.TrimRight(local.FlagUsagesWrapped(Width()), " \n")
	}
	sets := make([]*pflag.FlagSet, len(flagGroups)+1)
	for i := range sets {
		sets[i] = pflag.NewFlagSet("", pflag.ContinueOnError)
		sets[i].SortFlags = local.SortFlags
	}
	local.VisitAll(func(f *pflag.Flag) {
		i := len(flagGroups)
		for j, g := range flagGroups {
			if strings.Contains(" "+g.flags+" ", " "+f.Name+" ") {
				i = j
				break
			}
		}
		sets[i].AddFlag(f)
	})
	var b strings.Builder
	for i, s := range sets {
		title := "Other flags"
		if i < len(flagGroups) {
			title = flagGroups[i].title + " flags"
		}
		if u := strings.TrimRight(s.FlagUsagesWrapped(Width()), " \n"); u != "" {
			b.WriteString("\n\n" + title + ":\n" + u)
		}
	}
	return b.String()
}

// Width is the columns of the terminal on stdout, or 0 (no wrapping) when stdout is not one.
func Width() int {
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 20 {
		return w - 1
	}
	return 0
}
