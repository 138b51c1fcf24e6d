package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newGetCmd) }

func newGetCmd() *cobra.Command {
	var dev rbDevFlags
	var kf rbKeyFlags
	var out string
	cmd := &cobra.Command{
		Use:   "get DEV",
		Short: "Write the payload stored under a key to stdout or a file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kf.precheck(); err != nil {
				return err
			}
			e, err := rbOpenEngine(&dev, args[0], true, nil)
			if err != nil {
				return err
			}
			defer e.Close()
			k, err := kf.build(e.Config().Namespace)
			if err != nil {
				return err
			}
			m, ok := e.Lookup(k)
			if !ok {
				return notFound(fmt.Errorf("%s is not in the cache (rbctl ls lists the keys)", rbEscape(k.String())))
			}
			buf := make([]byte, m.Size)
			got, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
			if err != nil {
				return err
			}
			if !got[0] {
				return fmt.Errorf("%s: the stored payload failed its checksum or header check (run rbctl recover --verify)", rbEscape(k.String()))
			}
			w := cmd.OutOrStdout()
			if out != "" && out != "-" {
				return os.WriteFile(out, buf, 0o600)
			}
			_, err = w.Write(buf)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to this file instead of stdout")
	dev.add(cmd)
	kf.add(cmd)
	return cmd
}
