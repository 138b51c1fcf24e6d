package cachereport

import (
	"io"
	"strconv"

	"github.com/rbctl/rbctl/reports"
)

// Key is one entry of the index, as ls and inspect --keys list it.
type Key struct {
	Key    string `json:"key"`
	Slot   uint32 `json:"slot"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size"`
	Salt   string `json:"cache_salt,omitempty"`
	Handle int32  `json:"handle"`
	CRC    string `json:"crc32c,omitempty"`
}

// WriteKeys renders keys as ls's table; "-" is a key written without a placement directive.
func WriteKeys(w io.Writer, keys []Key) error {
	var rows [][]string
	for _, k := range keys {
		h := "-"
		if k.Handle >= 0 {
			h = strconv.Itoa(int(k.Handle))
		}
		rows = append(rows, []string{reports.Escape(k.Key), strconv.Itoa(k.Size), strconv.FormatUint(uint64(k.Slot), 10), reports.Escape(k.Salt), h})
	}
	return Table(w, []string{"key", "size", "slot", "cache_salt", "handle"}, rows)
}
