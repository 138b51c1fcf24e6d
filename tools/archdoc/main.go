// Command archdoc regenerates the import-graph section of docs/architecture.md from
// `go list` (make architecture; its test fails when the committed graph is stale). The
// write-path section comes from a real run: RBCTL_ARCHDOC_TRACE=1 go test -run
// TestWritePath ./tools/archdoc/ (make architecture runs it too).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// docPath is docs/architecture.md relative to the module root.
var docPath = filepath.Join("docs", "architecture.md")

func main() {
	root := flag.String("root", ".", "module root")
	flag.Parse()
	if err := regenerate(*root); err != nil {
		fmt.Fprintln(os.Stderr, "archdoc:", err)
		os.Exit(1)
	}
}

// regenerate rewrites the graph section of the architecture doc under root.
func regenerate(root string) error {
	pkgs, err := listPackages(root)
	if err != nil {
		return err
	}
	p := filepath.Join(root, docPath)
	doc, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	out, err := replaceSection(string(doc), "archdoc:graph", graphMarkdown(pkgs))
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return os.WriteFile(p, []byte(out), 0o644)
}
