package cli

// JSON and text output every command shares, and the flag groups as serve.go (the lead's
// file) still spells them: the other commands use flagsets directly, and these adapters go
// when serve.go does.

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
)

// rbDevFlags are the device-opening flags every engine command takes, and its --key-namespace.
type rbDevFlags struct {
	flagsets.Device
	cache rbCacheOpts
}

type rbCacheOpts struct{ flagsets.Cache }

func (f *rbDevFlags) add(cmd *cobra.Command)           { f.Add(cmd) }
func (o *rbCacheOpts) addNamespace(cmd *cobra.Command) { o.AddNamespace(cmd) }

// rbPlaceFlag is the --placement flag of the commands that write single keys.
type rbPlaceFlag struct{ flagsets.Placement }

func (f *rbPlaceFlag) add(cmd *cobra.Command, what string) { f.Add(cmd, what) }
func (f *rbPlaceFlag) check() error                        { return f.Check() }

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
