package cli

// JSON and text output every command shares.

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
)

// show prints v as JSON when asJSON, else as text.
func show(cmd *cobra.Command, asJSON bool, v any, text func(io.Writer) error) error {
	if asJSON {
		return printJSON(cmd, v)
	}
	return text(cmd.OutOrStdout())
}

// printJSON writes v as cmd's --json document: an object with schema ("rbctl.ls") and
// schema_version first (flagsets.Document); ls's list is its "keys".
func printJSON(cmd *cobra.Command, v any) error {
	return flagsets.Document(cmd.OutOrStdout(), flagsets.SchemaOf(cmd.CommandPath()), "keys", v)
}
