package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/engine"
)

func init() { register(newRmCmd) }

func newRmCmd() *cobra.Command {
	var dev flagsets.Device
	var kf flagsets.Key
	var force, dealloc, asJSON bool
	var pf flagsets.Placement
	cmd := &cobra.Command{
		Use:   "rm DEV",
		Short: "Remove a key from the cache (its slot becomes free and, by default, deallocated)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pf.Check(); err != nil {
				return err
			}
			if err := kf.Precheck(); err != nil {
				return err
			}
			e, err := dev.OpenEngine(&pf, args[0], false, func(c *engine.Config) {
				c.DeallocateOnDelete, c.DeallocateBatch = dealloc, 1
			})
			if err != nil {
				return err
			}
			k, err := kf.Build(e.Config().Namespace)
			if err != nil {
				e.CloseNoCheckpoint()
				return err
			}
			ok := e.DeleteMany([]engine.Key{k}, force)
			if err := e.Close(); err != nil {
				return err
			}
			if !ok[0] {
				return notFound(fmt.Errorf("%s is not in the cache", flagsets.QuoteKey(k.String())))
			}
			if asJSON {
				return printJSON(cmd, map[string]any{"removed": rbEscape(k.String()), "deallocated": dealloc})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", rbEscape(k.String()))
			return nil
		},
	}
	// A lock is the engine's refusal to free a slot a reader holds: a safety refusal, so it
	// is --force's one meaning.
	cmd.Flags().BoolVar(&force, "force", false, flagsets.ForceHelp("remove the key even if a reader holds it locked"))
	flagsets.DeallocateBool(cmd.Flags(), &dealloc, true, "also deallocate (discard/punch) the freed slot (all), or keep its blocks (none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	dev.Add(cmd)
	kf.Add(cmd)
	pf.Add(cmd, "the checkpoint written after the delete")
	dev.Choices.AddNamespace(cmd)
	return cmd
}
