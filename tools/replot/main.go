// Command replot draws a saved report's figures again (`rbctl bench|simulate --save FILE`),
// in the current reports/plots style and without running anything: the figures of
// docs/results/ are re-drawn from the JSON saved beside them.
//
//	go run ./tools/replot -dir docs/results/bench-emu/0.90-trim docs/results/bench-emu/0.90-trim/bench.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/reports/plots"
)

func main() {
	dir := flag.String("dir", "", "write the figures into this directory (required)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: replot -dir DIR REPORT.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *dir == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(1)
	}
	files, err := run(flag.Arg(0), *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replot:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println(f)
	}
}

// run reads the report at path and draws its figures into dir.
func run(path, dir string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r reports.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != reports.Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, r.Schema, reports.Schema)
	}
	if r.Interrupted {
		return nil, errors.New(path + ": the run was interrupted; its figures are not drawn")
	}
	return plots.All(&r, dir)
}
