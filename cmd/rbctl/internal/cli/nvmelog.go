package cli

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/nvme"
)

func init() { register(newNVMeCmd) }

func newNVMeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nvme",
		Short: "Low-level NVMe passthrough tools for debugging (log pages)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newNVMeLogCmd())
	return cmd
}

func newNVMeLogCmd() *cobra.Command {
	var (
		lid       uint8
		lsp       uint8
		lsi       uint16
		length    uint32
		offset    uint64
		nsid      uint32
		rae, raw  bool
		transport string
	)
	cmd := &cobra.Command{
		Use:   "log DEV --lid N",
		Short: "Read a log page (Get Log Page) and hex-dump it, or write the raw bytes with --raw",
		Long: "log sends Get Log Page to DEV (/dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an emu: spec)\n" +
			"and prints a hex dump of --len bytes. Numbers accept 0x prefixes. FDP logs take the\n" +
			"endurance group as --lsi (e.g. --lid 0x20 --lsi 1 for FDP configurations); the events\n" +
			"log takes --lsp 1 for host events. Logs longer than 64 KiB are read in pieces.",
		Example: "  rbctl nvme log /dev/ng0n1 --lid 0x02 --len 512\n" +
			"  rbctl nvme log /dev/ng0n1 --lid 0x22 --lsi 1 --len 64 --raw > stats.bin",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("lid") {
				return fmt.Errorf("--lid is required (e.g. --lid 0x02 for SMART / health)")
			}
			if length == 0 || length%4 != 0 {
				return fmt.Errorf("--len %d must be a positive multiple of 4", length)
			}
			if lsp > 0x7f {
				return fmt.Errorf("--lsp %d does not fit the 7-bit field", lsp)
			}
			out := cmd.OutOrStdout()
			if raw {
				if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
					return fmt.Errorf("--raw writes binary: redirect standard output to a file or drop --raw for a hex dump")
				}
			}
			dev := args[0]
			t, err := openNVMe(dev, transport, 0)
			if err != nil {
				return err
			}
			defer t.Close()
			p := nvme.LogPage{LID: lid, LSP: lsp, LSI: lsi, RAE: rae, Offset: offset, NSID: nsid}
			b, err := nvme.GetLog(t, p, int(length))
			if err != nil {
				return fmt.Errorf("%s: %w", dev, err)
			}
			if raw {
				_, err = out.Write(b)
				return err
			}
			fmt.Fprintf(out, "log 0x%02x lsp %d lsi %d offset %d nsid %#x: %d bytes\n", lid, lsp, lsi, offset, nsid, len(b))
			_, err = fmt.Fprintln(out, strings.TrimSuffix(hex.Dump(b), "\n"))
			return err
		},
	}
	f := cmd.Flags()
	f.Uint8Var(&lid, "lid", 0, "log page identifier (required)")
	f.Uint8Var(&lsp, "lsp", 0, "log specific parameter (7 bits)")
	f.Uint16Var(&lsi, "lsi", 0, "log specific identifier (the endurance group for FDP logs)")
	f.Uint32Var(&length, "len", 512, "bytes to read (multiple of 4)")
	f.Uint64Var(&offset, "offset", 0, "byte offset into the log (multiple of 4)")
	f.Uint32Var(&nsid, "nsid", nvme.NSIDAll, "namespace id in the command (default all = 0xffffffff, as nvme-cli get-log; 0 = none)")
	f.BoolVar(&rae, "rae", false, "retain asynchronous event")
	f.BoolVar(&raw, "raw", false, "write the raw bytes to standard output instead of a hex dump")
	f.StringVar(&transport, "transport", "", "passthrough transport: uring or ioctl (default: uring when available)")
	return cmd
}
