package reports

import (
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// TextWidth is the widest line rbctl's human-readable output prints, in bytes: tables and
// the notes under them stay within it.
const TextWidth = 160

// NewTable is the one table style of rbctl's text output: ASCII borders (a box-drawing
// border is one column but three bytes, and ambiguous-width in East Asian terminals) and
// headers as written.
func NewTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithSymbols(tw.NewSymbols(tw.StyleASCII)))
}

// Wrap breaks s at spaces into lines of at most width bytes; continuation lines start with
// indent. A single word longer than the width stays whole on its own line.
func Wrap(s string, width int, indent string) []string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return []string{""}
	}
	var out []string
	line := words[0]
	for _, w := range words[1:] {
		if len(line)+1+len(w) > width {
			out = append(out, line)
			line = indent + w
			continue
		}
		line += " " + w
	}
	return append(out, line)
}

// WriteWrapped writes s wrapped to TextWidth, continuation lines indented by two spaces.
func WriteWrapped(w io.Writer, s string) error {
	for _, l := range Wrap(s, TextWidth, "  ") {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Escape renders untrusted text (keys, salts, model names read from a device or given on
// the command line) with control characters and invalid UTF-8 escaped, so that output never
// carries terminal escape sequences or line breaks that were not ours.
func Escape(s string) string {
	clean := true
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '\\' || (c >= 0x80 && c < 0xa0) || c == 0xfffd {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}
