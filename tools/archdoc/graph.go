package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

const module = "github.com/rbctl/rbctl"

// Layers, top to bottom; an import never points up.
const (
	layerEntry  = iota // cmd/rbctl: main
	layerApp           // cmd/rbctl/internal/...: the application
	layerLib           // everything outside cmd/ and internal/
	layerKernel        // internal/sys, internal/uring: kernel plumbing
	layerTool          // other internal/ packages: test harnesses and tools
)

var layerNames = []string{
	"entry (`cmd/rbctl`: signal context, root command, exit code)",
	"application (`cmd/rbctl/internal/...`: the CLI wires flags to libraries and prints)",
	"library (public packages: engine, devices, placement, ...)",
	"kernel plumbing (`internal/sys`, `internal/uring`)",
	"tools and test harnesses (`tools/...`, `internal/archtest`; not imported by the layers above)",
}

// pkg is one package of the module with its module-local imports (paths relative to the
// module root, "." for the root itself).
type pkg struct {
	path    string
	imports []string
}

func rel(p string) (string, bool) {
	if p == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

func under(p, top string) bool { return p == top || strings.HasPrefix(p, top+"/") }

func layerOf(p string) int {
	switch {
	case p == "cmd/rbctl":
		return layerEntry
	case under(p, "cmd"):
		return layerApp
	case under(p, "internal/sys"), under(p, "internal/uring"):
		return layerKernel
	case under(p, "internal"), under(p, "tools"):
		return layerTool
	}
	return layerLib
}

// listPackages runs `go list` in dir: every package of the module that has non-test Go
// files, with its non-test imports.
func listPackages(dir string) ([]pkg, error) {
	cmd := exec.Command("go", "list", "-e", "-f", `{{if .GoFiles}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}`, "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []pkg
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p, ok := rel(f[0])
		if !ok {
			continue
		}
		var imps []string
		for _, i := range f[1:] {
			if r, ok := rel(i); ok {
				imps = append(imps, r)
			}
		}
		sort.Strings(imps)
		pkgs = append(pkgs, pkg{p, imps})
	}
	sort.Slice(pkgs, func(i, j int) bool {
		li, lj := layerOf(pkgs[i].path), layerOf(pkgs[j].path)
		if li != lj {
			return li < lj
		}
		return pkgs[i].path < pkgs[j].path
	})
	return pkgs, nil
}

// graphMarkdown renders the import graph: a mermaid chart by layer, then the adjacency list,
// then any import that points up a layer.
func graphMarkdown(pkgs []pkg) string {
	var b strings.Builder
	id := func(p string) string { return "p_" + strings.NewReplacer("/", "_", ".", "root", "-", "_").Replace(p) }
	b.WriteString("```mermaid\nflowchart TD\n")
	for l := range layerNames {
		var in []string
		for _, p := range pkgs {
			if layerOf(p.path) == l {
				in = append(in, p.path)
			}
		}
		if len(in) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  subgraph L%d[\"%s\"]\n", l, strings.ReplaceAll(strings.Fields(layerNames[l])[0], "`", ""))
		for _, p := range in {
			fmt.Fprintf(&b, "    %s[\"%s\"]\n", id(p), p)
		}
		b.WriteString("  end\n")
	}
	for _, p := range pkgs {
		for _, i := range p.imports {
			fmt.Fprintf(&b, "  %s --> %s\n", id(p.path), id(i))
		}
	}
	b.WriteString("```\n\n")
	var up []string
	for l, name := range layerNames {
		first := true
		for _, p := range pkgs {
			if layerOf(p.path) != l {
				continue
			}
			if first {
				fmt.Fprintf(&b, "**%s**\n\n", name)
				first = false
			}
			imps := "(nothing of ours)"
			if len(p.imports) > 0 {
				imps = "`" + strings.Join(p.imports, "`, `") + "`"
			}
			fmt.Fprintf(&b, "- `%s` → %s\n", p.path, imps)
			for _, i := range p.imports {
				if upward(l, layerOf(i)) {
					up = append(up, fmt.Sprintf("`%s` → `%s`", p.path, i))
				}
			}
		}
		if !first {
			b.WriteString("\n")
		}
	}
	if len(up) == 0 {
		b.WriteString("No import points up a layer.\n")
	} else {
		b.WriteString("Imports that point up a layer (to fix): " + strings.Join(up, ", ") + ".\n")
	}
	return b.String()
}

// upward reports whether a package of layer from importing one of layer to breaks the
// layering: imports point down, nothing but a tool imports a tool, and a tool imports no
// application package.
func upward(from, to int) bool {
	switch {
	case from == layerTool:
		return to <= layerApp
	case to == layerTool:
		return true
	}
	return to < from
}

// replaceSection puts body between the markers of section name in doc.
func replaceSection(doc, name, body string) (string, error) {
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + body + doc[j:], nil
}

// section returns what lies between the markers of section name ("" when absent).
func section(doc, name string) string {
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return ""
	}
	return doc[i+len(begin) : j]
}
