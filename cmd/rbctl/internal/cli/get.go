package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/engine"
)

func init() { register(newGetCmd) }

// getResult is get's --json output: the entry and its payload (base64, as encoding/json
// writes a []byte).
type getResult struct {
	Key     string `json:"key"`
	Slot    uint32 `json:"slot"`
	Size    int    `json:"size_bytes"`
	Payload []byte `json:"payload"`
}

func newGetCmd() *cobra.Command {
	var dev flagsets.Device
	var kf flagsets.Key
	var out flagsets.Out
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get DEV",
		Short: "Write the payload stored under a key to stdout or a file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kf.Precheck(); err != nil {
				return err
			}
			if err := out.Check(args[0]); err != nil {
				return err
			}
			e, err := dev.OpenEngine(nil, args[0], true, nil)
			if err != nil {
				return err
			}
			defer e.Close()
			k, err := kf.Build(e.Config().Namespace)
			if err != nil {
				return err
			}
			m, ok := e.Lookup(k)
			if !ok {
				return notFound(flagsets.MissingKey(k.String(), e.Stats().Recovery.Dropped))
			}
			buf := make([]byte, m.Size)
			got, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
			if err != nil {
				return err
			}
			if !got[0] {
				return fmt.Errorf("%s: the stored payload failed its checksum or header check (run rbctl recover --verify)", flagsets.QuoteKey(k.String()))
			}
			e.Close() // the payload is in memory: release the device before waiting on the output
			if asJSON && !out.File() {
				return printJSON(cmd, getResult{Key: rbEscape(k.String()), Slot: m.Slot, Size: m.Size, Payload: buf})
			}
			return out.Write(cmd.Context(), cmd.OutOrStdout(), buf)
		},
	}
	out.Add(cmd, "write to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the entry and its payload (base64) as JSON")
	dev.Add(cmd)
	kf.Add(cmd)
	return cmd
}
