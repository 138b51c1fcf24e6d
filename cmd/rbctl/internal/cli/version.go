package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/buildinfo"
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
func versionString() string { return buildinfo.Read(Version, Commit, BuildDate).String() }

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print rbctl's version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return printJSON(cmd, buildinfo.Read(Version, Commit, BuildDate))
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as JSON")
	return cmd
}
