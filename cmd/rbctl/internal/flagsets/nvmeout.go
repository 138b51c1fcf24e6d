package flagsets

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/fdp"
)

// NVMeOutput is nvme-cli's -o/--output-format and -b/--raw-binary, plus --json (rbctl fdp).
type NVMeOutput struct {
	format    string
	raw, json bool
}

// Add defines the output flags on cmd.
func (o *NVMeOutput) Add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output-format", "o", "normal", "output format: normal|json|binary")
	cmd.Flags().BoolVarP(&o.raw, "raw-binary", "b", false, "write the raw log/buffer to stdout")
	cmd.Flags().BoolVar(&o.json, "json", false, "same as --output-format json")
}

// Mode is the output the flags choose: normal, json or binary.
func (o *NVMeOutput) Mode() (string, error) {
	switch f := strings.ToLower(o.format); {
	case o.raw:
		return "binary", nil
	case o.json:
		return "json", nil
	case f == "normal" || f == "json" || f == "binary":
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q; use normal, json or binary", o.format)
}

// Emit writes, by mode, the raw bytes, the JSON value or the normal output.
func Emit(w io.Writer, mode string, raw []byte, js any, normal func(io.Writer)) error {
	switch mode {
	case "binary":
		_, err := w.Write(raw)
		return err
	case "json":
		return WriteJSON(w, js)
	}
	normal(w)
	return nil
}

// WriteJSON prints v as indented JSON (nvme-cli's pretty JSON) without escaping '&' and
// '<' (device specs contain '&').
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteEvents prints an FDP events log as nvme-cli does (fdp.EventsLog.WriteText), or, where
// nvme-cli prints nothing, a line saying the log holds no events (JSON keeps nvme-cli's
// {"n": 0, "events": []}).
func WriteEvents(w io.Writer, l *fdp.EventsLog, endgid uint32, host bool) {
	if len(l.Events) > 0 {
		l.WriteText(w)
		return
	}
	kind := "controller"
	if host {
		kind = "host"
	}
	fmt.Fprintf(w, "No %s events in the FDP events log of endurance group %d\n", kind, endgid)
}
