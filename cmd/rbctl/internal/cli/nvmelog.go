package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices"
)

func init() { register(newNVMeCmd) }

func newNVMeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "nvme", Short: "Low-level NVMe passthrough tools for debugging (log pages)", Args: cobra.NoArgs}
	cmd.AddCommand(newNVMeLogCmd())
	return cmd
}

func newNVMeLogCmd() *cobra.Command {
	o := devices.DefaultLogOptions()
	var raw, asJSON bool
	cmd := &cobra.Command{
		Use:   "log DEV --lid N",
		Short: "Read a log page (Get Log Page) and hex-dump it, or write the raw bytes with --raw",
		Long: "log sends Get Log Page to DEV (/dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an emu: spec)\n" +
			"and prints a hex dump of --len bytes. Numbers accept 0x prefixes. FDP logs take the\n" +
			"endurance group as --lsi (e.g. --lid 0x20 --lsi 1 for FDP configurations); the events\n" +
			"log takes --lsp 1 for host events. Logs longer than 64 KiB are read in pieces.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch out := cmd.OutOrStdout(); {
			case !cmd.Flags().Changed("lid"):
				return fmt.Errorf("--lid is required (e.g. --lid 0x02 for SMART / health)")
			case o.Len == 0 || o.Len%4 != 0:
				return fmt.Errorf("--len %d must be a positive multiple of 4", o.Len)
			case o.Page.LSP > 0x7f:
				return fmt.Errorf("--lsp %d does not fit the 7-bit field", o.Page.LSP)
			case raw && asJSON:
				return fmt.Errorf("--raw and --json exclude each other: --raw writes the log's bytes, --json a document with them in hex")
			case raw && isTerminal(out):
				return fmt.Errorf("--raw writes binary: redirect standard output to a file or drop --raw for a hex dump")
			}
			d, err := devices.ReadLog(args[0], o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case raw:
				_, err = out.Write(d.Data)
			case asJSON:
				err = flagsets.WriteJSON(out, d.JSON())
			default:
				err = d.WriteText(out)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.Uint8Var(&o.LID, "lid", 0, "log page identifier (required)")
	f.Uint8Var(&o.Page.LSP, "lsp", 0, "log specific parameter (7 bits)")
	f.Uint16Var(&o.Page.LSI, "lsi", 0, "log specific identifier (the endurance group for FDP logs)")
	f.Uint32Var(&o.Len, "len", o.Len, "bytes to read (multiple of 4)")
	f.Uint64Var(&o.Page.Offset, "offset", 0, "byte offset into the log (multiple of 4)")
	f.Uint32VarP(&o.Page.NSID, "namespace-id", "n", o.Page.NSID, "namespace id in the command (default all = 0xffffffff, as nvme-cli get-log; 0 = none)")
	f.BoolVar(&o.Page.RAE, "rae", false, "retain asynchronous event")
	f.BoolVar(&raw, "raw", false, "write the raw bytes to standard output instead of a hex dump")
	f.BoolVar(&asJSON, "json", false, "print the log as JSON: its parameters and the bytes in hex")
	flagsets.TransportFlag(f, &o.Admin.Transport)
	nsidAlias(cmd)
	return cmd
}

func isTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr }) // *os.File, flagsets.Stdout
	return ok && term.IsTerminal(int(f.Fd()))
}
