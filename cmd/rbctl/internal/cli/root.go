// Package cli holds rbctl's commands, one file per command. Each file registers its
// constructor with register() from an init function, so commands never edit this file.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/help"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/logging"
)

var constructors []func() *cobra.Command

// register adds a top-level command; call it from an init function in the command's file.
func register(newCmd func() *cobra.Command) { constructors = append(constructors, newCmd) }

// ExitError carries a specific exit code out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// NewRoot builds the root command with every registered sub-command.
func NewRoot() *cobra.Command {
	var logs logging.Options
	root := &cobra.Command{
		Use:           "rbctl",
		Short:         "NVMe FDP research toolkit for raw-block LLM KV-caches",
		Long:          "rbctl formats, inspects, recovers and benchmarks raw-block KV-cache devices\n(LMCache raw-block compatible), and reads and drives NVMe Flexible Data Placement.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		// The contract's one gate: every flag of every command is range-checked before the
		// command runs (contract.go).
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := logs.Setup(cmd.ErrOrStderr()); err != nil { // one slog log (logging)
				return err
			}
			if err := validateFlags(cmd); err != nil {
				return err
			}
			return flagsets.RefuseInMemory(cmd, args) // a cache there is gone at exit
		},
	}
	logs.Register(root.PersistentFlags())
	root.SetVersionTemplate("{{.Version}}\n")
	cmds := make([]*cobra.Command, 0, len(constructors))
	for _, c := range constructors {
		cmds = append(cmds, c())
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name() < cmds[j].Name() })
	root.AddCommand(cmds...)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictGroups(root)
	attachExamples(root)
	help.Arrange(root)      // commands and long flag lists under headings
	flagsets.Complete(root) // shell completion of enumerated flag values
	flagsets.Suggest(root)  // "did you mean" for mistyped flags
	hintAll(root)           // library errors name config fields; say which flag sets them (hints.go)
	return root
}

// strictGroups makes every command that only groups sub-commands (rbctl, fdp, nvme, emu)
// refuse an unknown sub-command with an error instead of printing help and exiting 0.
func strictGroups(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if s := cmd.SuggestionsFor(args[0]); len(args) > 0 && len(s) > 0 {
				return fmt.Errorf("unknown command %q for %q; did you mean %s?", args[0], cmd.CommandPath(), strings.Join(s, " or "))
			} else if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q (%s --help lists them)", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
	for _, s := range c.Commands() {
		strictGroups(s)
	}
}

// Execute runs rbctl with args and returns the process exit code.
func Execute(ctx context.Context, args []string) int {
	root, stdout := NewRoot(), &flagsets.Stdout{W: os.Stdout}
	root.SetArgs(args)
	root.SetOut(stdout) // every command's output (and help) goes through it: a failed write fails
	err := root.ExecuteContext(ctx)
	if err == nil {
		err = stdout.Err()
	}
	code := exitCode(ctx, err)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "rbctl: %s\n", oneLine(err))
	case ctx.Err() != nil:
		// The command returned normally, but after a SIGINT: whatever it printed is partial.
		code = exitInterrupted
	}
	if code == exitInterrupted && (err == nil || !errors.Is(err, errInterrupted)) {
		fmt.Fprintln(os.Stderr, "rbctl: interrupted")
	}
	return code
}

// oneLine keeps an error message on one line (a wrapped multi-error joins with "; ").
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
