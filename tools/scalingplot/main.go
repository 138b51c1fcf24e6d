// Command scalingplot turns the "scaling:" lines of scripts/vmtest/guest.d/80-scaling.sh
// (from the host run of `make scaling` and from a `make vmtest` console log) into
// docs/scaling.json and docs/scaling.png, and prints the points as a Markdown table
// (docs/scaling.md). A place (host, vm) not measured in the inputs keeps its run from the
// previous JSON file.
//
//	go run ./tools/scalingplot -json docs/scaling.json -png docs/scaling.png host.txt console-host-plain.log
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	jsonPath := flag.String("json", "docs/scaling.json", "the JSON document to write (and to keep unmeasured runs from)")
	pngPath := flag.String("png", "docs/scaling.png", "the plot to write")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: scalingplot [-json FILE] [-png FILE] INPUT...  (files holding scaling: lines)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*jsonPath, *pngPath, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "scalingplot:", err)
		os.Exit(1)
	}
}

func run(jsonPath, pngPath string, inputs []string) error {
	var fresh []Run
	for _, in := range inputs {
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		runs, err := Parse(f, in)
		f.Close()
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			fmt.Fprintf(os.Stderr, "scalingplot: note: %s holds no scaling lines\n", in)
		}
		fresh = append(fresh, runs...)
	}
	prev, err := ReadDoc(jsonPath)
	if err != nil {
		return err
	}
	runs := Merge(fresh, prev)
	if len(runs) == 0 {
		return fmt.Errorf("no measured points in %v or %s", inputs, jsonPath)
	}
	doc := NewDoc(runs, time.Now().UTC().Format(time.RFC3339))
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := Render(runs, pngPath); err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Printf("scalingplot: %s (%s, %d cores, %s): %d points from %s\n", r.Where, r.Accel, r.Cores, r.MeasuredAt, len(r.Points), r.Source)
	}
	for _, s := range doc.Saturation {
		fmt.Printf("scalingplot: %s %s: cores saturated at %d devices (%.2f of %d busy)\n", s.Where, s.Kind, s.Devices, s.BusyCores, s.Cores)
	}
	fmt.Printf("scalingplot: wrote %s and %s\n\n", jsonPath, pngPath)
	return WriteTable(os.Stdout, runs)
}
