package flagsets

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/reports/plots"
)

// ReportOut selects the report format, the saved copy and the plots (bench, simulate).
type ReportOut struct {
	json, csv, markdown, perHandle bool
	plot, save                     string
}

// Register defines the output flags on cmd.
func (o *ReportOut) Register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&o.json, "json", false, "print the report as JSON (schema "+reports.Schema+" v"+strconv.Itoa(reports.SchemaVersion)+")")
	fs.BoolVar(&o.csv, "csv", false, "print the report as CSV")
	fs.BoolVar(&o.markdown, "markdown", false, "print the report as Markdown tables")
	fs.BoolVar(&o.perHandle, "per-handle", false, "also print the modelled WAF per placement handle (always in --json)")
	fs.StringVar(&o.plot, "plot", "", "write PNG and SVG figures into this directory")
	fs.StringVar(&o.save, "save", "", "also write the JSON report to this file")
	cmd.MarkFlagsMutuallyExclusive("json", "csv", "markdown")
}

// Check refuses, before anything runs, an unwritable destination or one whose contents
// would be lost (safety.Output: one of inputs — the command's devices and input files — a
// cache, a filesystem image, a device, a file in use).
func (o *ReportOut) Check(inputs ...string) error {
	if o.save != "" {
		if err := safety.Output("--save", o.save, inputs); err != nil {
			return err
		}
		if err := reports.CheckFile(o.save); err != nil {
			return fmt.Errorf("--save %s: %w", o.save, err)
		}
	}
	if o.plot != "" {
		if err := reports.CheckDir(o.plot); err != nil {
			return fmt.Errorf("--plot %s: %w", o.plot, err)
		}
		return checkPlotDir(o.plot, inputs)
	}
	return nil
}

// Emit prints r on out, saves it and draws its figures (listing them on errOut).
func (o *ReportOut) Emit(out, errOut io.Writer, r *reports.Report) error {
	format := "table" // the three are mutually exclusive
	switch {
	case o.json:
		format = "json"
	case o.csv:
		format = "csv"
	case o.markdown:
		format = "markdown"
	}
	r.PerHandle = o.perHandle
	if err := reports.Write(out, r, format); err != nil {
		return err
	}
	if o.save != "" {
		if err := reports.SaveJSON(o.save, r); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	if o.plot != "" && r.Interrupted {
		// Figures of a cut-short run would carry no mark; the table and JSON do.
		fmt.Fprintf(errOut, "plots: none drawn (interrupted)\n")
	} else if o.plot != "" {
		files, err := plots.All(r, o.plot)
		if err != nil {
			return fmt.Errorf("--plot %s: %w", o.plot, err)
		}
		reports.WriteWrapped(errOut, "plots: "+strings.Join(files, " "))
	}
	return nil
}
