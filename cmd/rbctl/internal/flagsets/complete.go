package flagsets

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/admission"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/sim"
	"github.com/rbctl/rbctl/workloads"
)

// completions are the values a shell completes for the enumerated flags, wherever a command
// has them. A value ending in ":" takes a parameter (mooncake:FILE); "+" joins policies.
func completions() map[string][]string {
	var pol []string
	for _, k := range placement.Known() {
		if k = strings.TrimSuffix(strings.TrimSuffix(k, "[:ranks=N]"), ":N"); !strings.Contains(k, "=") {
			pol = append(pol, k)
		}
	}
	pol = append(pol, "static:", "cache-salt:pin=", "metadata-class+cache-salt")
	for _, o := range sim.OracleModes {
		pol = append(pol, "oracle:"+o)
	}
	var models []string
	for _, m := range workloads.ModelPresets {
		models = append(models, m.Name)
	}
	return map[string][]string{
		"placement": pol,
		"eviction":  {string(workloads.LRU), string(workloads.FIFO), string(workloads.Region), string(workloads.RegionFIFO), "none"},
		"workload":  {"kv", "sequential", "uniform", "zipf", "trace:", "mooncake:"},
		"model":     models,
		"admission": {admission.All, admission.SecondHit, admission.TinyLFU, admission.Depth + ":"},
		// serve's and cluster-bench's; bench, rm and simulate take all and none (below)
		"deallocate": {"devices", "all", "none"},
	}
}

// Complete registers the value completion of every enumerated flag on root and every
// command under it. A comma-separated list (--placement none,cache-salt) completes its last
// element; values a command refuses (none for simulate's --eviction, oracles outside
// simulate) are offered too and refused, with the accepted ones, when the command runs.
func Complete(root *cobra.Command) {
	vals := completions()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, vs := range vals {
			f := c.Flags().Lookup(name)
			if f == nil || f.Name != name || f.Value.Type() == "bool" {
				continue // absent, an old spelling of another flag (put's --model is --model-name), or a switch
			}
			if _, ok := f.Value.(deallocBool); ok {
				vs = []string{"all", "none"}
			}
			_ = c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
				head := typed[:strings.LastIndex(typed, ",")+1]
				var out []string
				for _, v := range vs {
					if strings.HasPrefix(head+v, typed) {
						out = append(out, head+v)
					}
				}
				return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
			})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
