package cli

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newLsCmd) }

func newLsCmd() *cobra.Command {
	var dev rbDevFlags
	var asJSON bool
	var salt string
	cmd := &cobra.Command{
		Use:   "ls DEV",
		Short: "List the keys in the cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := rbOpenEngine(&dev, args[0], true, nil)
			if err != nil {
				return err
			}
			defer e.Close()
			var keys []inspectKey
			e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
				if salt != "" && k.CacheSalt() != salt {
					return true
				}
				ik := inspectKey{Key: k.String(), Slot: m.Slot, Offset: m.Offset, Size: m.Size, Salt: k.CacheSalt(), Handle: int32(m.Handle)}
				if m.HasChecksum {
					ik.CRC = fmt.Sprintf("%08x", m.Checksum)
				}
				keys = append(keys, ik)
				return true
			})
			sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
			if asJSON {
				if keys == nil {
					keys = []inspectKey{}
				}
				return rbJSON(cmd.OutOrStdout(), keys)
			}
			var rows [][]string
			for _, k := range keys {
				h := "-" // written without a placement directive
				if k.Handle >= 0 {
					h = strconv.Itoa(int(k.Handle))
				}
				rows = append(rows, []string{rbEscape(k.Key), strconv.Itoa(k.Size), strconv.FormatUint(uint64(k.Slot), 10), rbEscape(k.Salt), h})
			}
			return rbTable(cmd.OutOrStdout(), []string{"key", "size", "slot", "cache_salt", "handle"}, rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&salt, "salt", "", "only keys with this cache_salt")
	dev.add(cmd)
	return cmd
}
