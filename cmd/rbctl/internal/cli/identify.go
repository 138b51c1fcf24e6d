package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices"
)

func init() { register(newIdentifyCmd) }

func newIdentifyCmd() *cobra.Command {
	var asJSON bool
	var opt devices.AdminOptions
	cmd := &cobra.Command{
		Use:   "identify DEV",
		Short: "Identify an NVMe controller and namespace (model, serial, capabilities, size, LBA format)",
		Long: "identify sends Identify Controller and Identify Namespace to DEV (/dev/ngXnY,\n" +
			"/dev/nvmeXnY, /dev/nvmeX, or an emu: spec) and prints a summary. --json uses nvme-cli's\n" +
			"field names (sn, mn, fr, ctratt, oncs, nsze, ncap, nuse, flbas, lbafs, ...) plus derived\n" +
			"values (lbads, block_size, capacity_bytes, max_transfer_bytes). Needs root for devices.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := devices.OpenAdmin(args[0], opt)
			if err != nil {
				return err
			}
			defer a.Close()
			id, err := a.Identify()
			if err != nil {
				return err
			}
			return show(cmd, asJSON, id, func(w io.Writer) error {
				return writeSections(w, []devices.Section{{Header: []string{"field", "value"}, Rows: id.Rows()}})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON with nvme-cli field names")
	flagsets.TransportFlag(cmd.Flags(), &opt.Transport)
	cmd.Flags().Uint32VarP(&opt.NSID, "namespace-id", "n", 0, "namespace to identify when DEV is a controller (/dev/nvmeX); default: the first active one")
	nsidAlias(cmd)
	return cmd
}
