package reports

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"golang.org/x/term"
)

// TextWidth is the widest line rbctl's human-readable output prints, in bytes: tables and
// the notes under them stay within it, and within the terminal when they go to one.
const TextWidth = 160

// Width is the width the text for w fits: TextWidth, or the terminal's when w is one and
// narrower.
func Width(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 && cols-1 < TextWidth {
			return cols - 1
		}
	}
	return TextWidth
}

// NewTable is the one table style of rbctl's text output: ASCII borders (a box-drawing
// border is one column but three bytes, and ambiguous-width in East Asian terminals) and
// headers as written.
// On a terminal narrower than the table, cells wrap so that no line does.
func NewTable(w io.Writer) *tablewriter.Table {
	opts := []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithSymbols(tw.NewSymbols(tw.StyleASCII))}
	if width := Width(w); width < TextWidth {
		opts = append(opts, tablewriter.WithMaxWidth(width), tablewriter.WithRowAutoWrap(tw.WrapNormal), tablewriter.WithHeaderAutoWrap(tw.WrapNormal))
	}
	return tablewriter.NewTable(w, opts...)
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

// WriteWrapped writes s wrapped to Width(w), continuation lines indented by two spaces.
func WriteWrapped(w io.Writer, s string) error {
	for _, l := range Wrap(s, Width(w), "  ") {
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
