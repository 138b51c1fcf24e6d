package cli

// What bench and simulate add to their libraries' answers: the command's outcome. The
// refusals' fixes, in the flags the user types, are in hints.go.

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/reports"
)

// report prints rep as out's flags ask, then returns the command's outcome.
func report(cmd *cobra.Command, out *flagsets.ReportOut, rep *reports.Report, what string) error {
	if err := out.Emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), rep); err != nil {
		return err
	}
	return outcome(rep, cmd.Name(), what)
}

// outcome is the command's error once the report is out: an interruption (exit 130),
// else failed runs (exit 1).
func outcome(rep *reports.Report, command, what string) error {
	if rep.Interrupted {
		return fmt.Errorf("%w: partial result (%s)", errInterrupted, rep.Partial)
	}
	var failed []string
	for _, r := range rep.Runs {
		if r.Failed() {
			name := r.Policy
			if rep.Sweep != "" {
				name += fmt.Sprintf(" @ %s=%.4g", rep.Sweep, r.Param)
			}
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %d of %d %s failed (%s); their errors are under the table", command, len(failed), len(rep.Runs), what, strings.Join(failed, ", "))
	}
	return nil
}
