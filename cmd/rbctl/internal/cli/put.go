package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newPutCmd) }

// maxPutBytes bounds what put reads before it knows the slot size.
const maxPutBytes = 1 << 30

func newPutCmd() *cobra.Command {
	var dev rbDevFlags
	var kf rbKeyFlags
	var in string
	var pf rbPlaceFlag
	cmd := &cobra.Command{
		Use:   "put DEV [FILE|-]",
		Short: "Store a file (or stdin) in the cache under a key",
		Example: `  rbctl put cache.img --model my/model --rank 0 --hash 00ff --salt tenant data.bin
  echo hello | rbctl put cache.img --key 'm@0x00000000@aa' -
  rbctl put 'emu:/var/tmp/e.img?size=1G' --placement cache-salt --model m --hash 01 --salt rag doc.bin`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				in = args[1]
			}
			if err := pf.check(); err != nil {
				return err
			}
			if err := kf.precheck(); err != nil {
				return err
			}
			var r io.Reader = cmd.InOrStdin()
			if in != "" && in != "-" {
				f, err := os.Open(in)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			// A slot is far smaller than this; the cap keeps a runaway stdin from filling memory.
			data, err := io.ReadAll(io.LimitReader(r, maxPutBytes+1))
			if err != nil {
				return fmt.Errorf("reading input: %w", err)
			}
			if len(data) > maxPutBytes {
				return fmt.Errorf("input is larger than %s; no slot holds that much", rbBytes(maxPutBytes))
			}
			if len(data) == 0 {
				return fmt.Errorf("input is empty; nothing to store")
			}
			e, err := rbOpenEnginePlaced(&dev, &pf, kf.model, args[0], false, nil)
			if err != nil {
				return err
			}
			k, err := kf.build(e.Config().Namespace)
			if err != nil {
				e.CloseNoCheckpoint()
				return err
			}
			max := e.Config().SlotBytes - int64(e.Config().HeaderBytes)
			if int64(len(data)) > max {
				e.CloseNoCheckpoint()
				return fmt.Errorf("input has %d bytes; a slot holds at most %d (slot_bytes %d - header_bytes %d)", len(data), max, e.Config().SlotBytes, e.Config().HeaderBytes)
			}
			res, err := e.PutMany([]engine.Key{k}, [][]byte{data})
			if err != nil {
				e.Close()
				return err
			}
			if cerr := e.Close(); cerr != nil {
				return cerr
			}
			switch {
			case len(res.Stored) == 1:
				m := fmt.Sprintf("stored %d bytes under %s\n", len(data), rbEscape(k.String()))
				fmt.Fprint(cmd.OutOrStdout(), m)
				return nil
			case res.Results[0]:
				return fmt.Errorf("%s is already stored (not rewritten); remove it first with rbctl rm", rbEscape(k.String()))
			}
			return fmt.Errorf("not stored: no free slot (the cache is full); remove keys with rbctl rm")
		},
	}
	dev.add(cmd)
	kf.add(cmd)
	pf.add(cmd, "the slot write and the checkpoint")
	dev.cache.addNamespace(cmd)
	return cmd
}
