package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/engine"
)

func init() { register(newPutCmd) }

func newPutCmd() *cobra.Command {
	var dev flagsets.Device
	var kf flagsets.Key
	var pf flagsets.Placement
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "put DEV [FILE|-]",
		Short: "Store a file (or stdin) in the cache under a key",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pf.Check(); err != nil {
				return err
			}
			if err := kf.Precheck(); err != nil {
				return err
			}
			// The input is read before the device is taken for writing (a slow stdin keeps
			// no one out), no more than one byte past a slot's payload.
			data, err := dev.ReadPayload(cmd.Context(), args[0], cmd.InOrStdin(), args[1:])
			if err != nil {
				return err
			}
			e, err := dev.OpenEngine(&pf, args[0], false, nil)
			if err != nil {
				return err
			}
			k, err := kf.Build(e.Config().Namespace)
			if err == nil {
				err = flagsets.FitsSlot(data, e.Config())
			}
			if err != nil {
				e.CloseNoCheckpoint()
				return err
			}
			res, err := e.PutMany([]engine.Key{k}, [][]byte{data})
			if err != nil {
				e.Close()
				return err
			}
			if err := e.Close(); err != nil {
				return err
			}
			switch {
			case len(res.Stored) == 1 && asJSON:
				return printJSON(cmd, map[string]any{"stored": rbEscape(k.String()), "size_bytes": len(data)})
			case len(res.Stored) == 1:
				fmt.Fprintf(cmd.OutOrStdout(), "stored %d bytes under %s\n", len(data), rbEscape(k.String()))
				return nil
			case res.Results[0]:
				return fmt.Errorf("%s is already stored (not rewritten); remove it first with rbctl rm", flagsets.QuoteKey(k.String()))
			}
			return fmt.Errorf("not stored: no free slot (the cache is full); remove keys with rbctl rm")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was stored as JSON")
	dev.Add(cmd)
	kf.Add(cmd)
	pf.Add(cmd, "the slot write and the checkpoint")
	dev.Choices.AddNamespace(cmd)
	return cmd
}
