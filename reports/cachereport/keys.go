package cachereport

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/reports"
)

// Key is one entry of the index, as ls and inspect --keys list it.
type Key struct {
	Key    string `json:"key"`
	Slot   uint32 `json:"slot"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size_bytes"`
	Salt   string `json:"cache_salt,omitempty"`
	Handle int32  `json:"handle"` // -1: written without a placement directive (absent in JSON)
	CRC    string `json:"crc32c,omitempty"`
}

// MarshalJSON leaves out the handle of a key written without a placement directive.
func (k Key) MarshalJSON() ([]byte, error) {
	type plain Key
	var h *int32
	if k.Handle >= 0 {
		h = &k.Handle
	}
	return json.Marshal(struct {
		plain
		Handle *int32 `json:"handle,omitempty"`
	}{plain(k), h})
}

// UnmarshalJSON reads MarshalJSON's form: no handle is -1.
func (k *Key) UnmarshalJSON(b []byte) error {
	type plain Key
	v := struct {
		*plain
		Handle *int32 `json:"handle"`
	}{plain: (*plain)(k)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	k.Handle = -1
	if v.Handle != nil {
		k.Handle = *v.Handle
	}
	return nil
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
