// Command mangen writes rbctl's man pages, one per command (rbctl.1, rbctl-bench.1, ...),
// from the command tree itself (cobra/doc), so they say what --help says: `make man` runs
// it into out/man. Usage: go run ./cmd/rbctl/internal/mangen DIR
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra/doc"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mangen DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
}

// write writes a page per command of rbctl's tree into dir.
func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := cli.NewRoot()
	root.DisableAutoGenTag = true // the pages change only when the commands do
	hdr := &doc.GenManHeader{Title: "RBCTL", Section: "1", Source: "rbctl", Manual: "rbctl manual"}
	return doc.GenManTree(root, hdr, dir)
}
