package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version, Commit and BuildDate are set at build time with -ldflags "-X
// github.com/rbctl/rbctl/cmd/rbctl/internal/cli.Version=..." (the Makefile does). Without them the
// commit and date come from the VCS stamp Go embeds in module builds.
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
)

func init() { register(newVersionCmd) }

// versionString is what `rbctl version` and `rbctl --version` print.
func versionString() string {
	commit, date, dirty := Commit, BuildDate, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.time":
				if date == "" {
					date = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" && Commit == "" {
					dirty = "+dirty"
				}
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("rbctl %s (commit %s%s, built %s, %s, %s/%s)", Version, commit, dirty, date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print rbctl's version, commit and build date",
		Example: "  rbctl version\n  rbctl --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return nil
		},
	}
}
