package nvme

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// LogDump is a log page as read: the Get Log Page parameters and the bytes returned.
type LogDump struct {
	Page LogPage
	Data []byte
}

// JSON is the dump for a script: the parameters, the length and the bytes in hex.
func (d LogDump) JSON() map[string]any {
	p := d.Page
	return map[string]any{"lid": p.LID, "lsp": p.LSP, "lsi": p.LSI, "offset": p.Offset, "nsid": p.NSID,
		"length": len(d.Data), "data": hex.EncodeToString(d.Data)}
}

// WriteText writes the dump for a person: one line of parameters, then a hex dump.
func (d LogDump) WriteText(w io.Writer) error {
	p := d.Page
	fmt.Fprintf(w, "log 0x%02x lsp %d lsi %d offset %d nsid %#x: %d bytes\n", p.LID, p.LSP, p.LSI, p.Offset, p.NSID, len(d.Data))
	_, err := fmt.Fprintln(w, strings.TrimSuffix(hex.Dump(d.Data), "\n"))
	return err
}
