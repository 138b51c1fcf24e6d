package cli

import (
	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/hints"
)

// hintAll wraps the RunE of c and of every command under it with hints.Add: libraries state
// facts in their own terms, and package hints, the one place that does, adds the flag or
// command that gets past them.
func hintAll(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return hints.Add(cmd, run(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		hintAll(sub)
	}
}
