package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newRmCmd) }

func newRmCmd() *cobra.Command {
	var dev rbDevFlags
	var kf rbKeyFlags
	var force, dealloc bool
	var pf rbPlaceFlag
	cmd := &cobra.Command{
		Use:   "rm DEV",
		Short: "Remove a key from the cache (its slot becomes free)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pf.check(); err != nil {
				return err
			}
			if err := kf.precheck(); err != nil {
				return err
			}
			e, err := rbOpenEnginePlaced(&dev, &pf, kf.model, args[0], false, func(c *engine.Config) {
				c.DeallocateOnDelete = dealloc
				c.DeallocateBatch = 1
			})
			if err != nil {
				return err
			}
			k, err := kf.build(e.Config().Namespace)
			if err != nil {
				e.CloseNoCheckpoint()
				return err
			}
			ok := e.DeleteMany([]engine.Key{k}, force)
			if err := e.Close(); err != nil {
				return err
			}
			if !ok[0] {
				return notFound(fmt.Errorf("%s is not in the cache", rbEscape(k.String())))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", rbEscape(k.String()))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove even if locked")
	cmd.Flags().BoolVar(&dealloc, "deallocate", false, "also deallocate (discard/punch) the freed slot")
	dev.add(cmd)
	kf.add(cmd)
	pf.add(cmd, "the checkpoint written after the delete")
	dev.cache.addNamespace(cmd)
	return cmd
}
