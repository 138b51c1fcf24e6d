// Package archtest checks the layout rules of docs/architecture.md on the source tree: which
// packages may import which, how large a file and the CLI may grow, and that library errors
// state facts without naming a CLI flag. It holds tests only.
package archtest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/rbctl/rbctl"

// Limits of the layout (issue 17).
const (
	maxFileLines = 600  // any non-test, non-generated .go file
	maxCLILines  = 2300 // cmd/rbctl/internal/cli, non-test
	cliDir       = "cmd/rbctl/internal/cli"
)

// kernelPackages are the internal/ packages a library may import.
var kernelPackages = map[string]bool{"internal/sys": true, "internal/uring": true}

// goFile is one parsed non-test source file.
type goFile struct {
	path  string // relative to the module root, slash-separated
	dir   string // its package directory
	lines int
	gen   bool // "Code generated ... DO NOT EDIT."
	ast   *ast.File
	fset  *token.FileSet
}

var generated = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// moduleRoot is two directories up from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// sources parses every non-test .go file of the module (not testdata, not hidden or
// build-output directories).
func sources(t *testing.T) []goFile {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var files []goFile
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "out" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		files = append(files, goFile{path: rel, dir: filepath.ToSlash(filepath.Dir(rel)), lines: countLines(src), gen: isGenerated(src), ast: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files found")
	}
	return files
}

func countLines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

func isGenerated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if generated.MatchString(line) {
			return true
		}
	}
	return false
}

// imports lists the module-local imports of f, relative to the module root ("" is the root).
func (f goFile) imports() []string {
	var out []string
	for _, s := range f.ast.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		if p == module {
			out = append(out, "")
		} else if rest, ok := strings.CutPrefix(p, module+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

func under(dir, top string) bool { return dir == top || strings.HasPrefix(dir, top+"/") }

// isLibrary reports whether a package directory is a library: outside cmd/ and internal/.
func isLibrary(dir string) bool {
	return !under(dir, "cmd") && !under(dir, "internal") && !under(dir, "tools")
}

// isKernel says dir is kernel plumbing: internal/sys, internal/uring and below.
func isKernel(dir string) bool { return under(dir, "internal/sys") || under(dir, "internal/uring") }

// report fails t with every violation, sorted, one a line.
func report(t *testing.T, what string, v []string) {
	t.Helper()
	if len(v) == 0 {
		return
	}
	sort.Strings(v)
	t.Errorf("%s: %d violations:\n  %s", what, len(v), strings.Join(v, "\n  "))
}

// (a) Nothing outside cmd/ imports a cmd/ package: the application sits on top.
func TestNothingOutsideCmdImportsCmd(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		if under(f.dir, "cmd") {
			continue
		}
		for _, imp := range f.imports() {
			if under(imp, "cmd") {
				v = append(v, f.path+" imports "+imp)
			}
		}
	}
	report(t, "packages outside cmd/ importing cmd/", v)
}

// (b) A library imports internal/ only for kernel plumbing (internal/sys, internal/uring).
func TestLibrariesImportOnlyKernelInternals(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		if !isLibrary(f.dir) {
			continue
		}
		for _, imp := range f.imports() {
			if under(imp, "internal") && !kernelPackages[imp] && !under(imp, "internal/sys") && !under(imp, "internal/uring") {
				v = append(v, f.path+" imports "+imp)
			}
		}
	}
	report(t, "library packages importing internal/ beyond sys and uring", v)
}

// (b2) The tools (tools/...) are leaves: nothing outside tools/ imports them. The kernel
// plumbing is the ground floor: it imports no package of the module but its own and units
// (pure functions on sizes, itself importing nothing of the module).
func TestToolsAreLeavesAndKernelIsGround(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		for _, imp := range f.imports() {
			switch {
			case under(imp, "tools") && !under(f.dir, "tools"):
				v = append(v, f.path+" imports the tool "+imp)
			case isKernel(f.dir) && !isKernel(imp) && imp != "units":
				v = append(v, f.path+" (kernel plumbing) imports "+imp)
			}
		}
	}
	report(t, "imports of tools, or by the kernel plumbing of anything above it", v)
}

// (c) No non-test, non-generated file is over maxFileLines lines.
func TestNoFileOverLimit(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		if !f.gen && f.lines > maxFileLines {
			v = append(v, f.path+": "+strconv.Itoa(f.lines)+" lines")
		}
	}
	largest := goFile{}
	for _, f := range sources(t) {
		if !f.gen && f.lines > largest.lines {
			largest = f
		}
	}
	t.Logf("largest non-generated file: %s, %d lines (limit %d)", largest.path, largest.lines, maxFileLines)
	report(t, "files over "+strconv.Itoa(maxFileLines)+" lines", v)
}

// (d) The CLI package wires; its non-test code stays under maxCLILines.
func TestCLIPackageSize(t *testing.T) {
	total, n := 0, 0
	for _, f := range sources(t) {
		if f.dir == cliDir {
			total += f.lines
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no files in %s", cliDir)
	}
	t.Logf("%s: %d non-test lines in %d files (limit %d)", cliDir, total, n, maxCLILines)
	if total > maxCLILines {
		t.Errorf("%s: %d non-test lines in %d files, over %d", cliDir, total, n, maxCLILines)
	}
}

// importRules: no package under from imports a package under any of to (issue 25).
var importRules = []struct {
	from string
	to   []string
	why  string
}{
	{"reports", []string{"engine"}, "reports render what cache, bench and sim fill"},
	{"workloads", []string{"engine"}, "workloads drive a Backend; the engine is one"},
	{"cmd/rbctl", []string{"nvme", "ftl"}, "flag values are parsed by the library that owns them, and package hints phrases the FTL model's refusals through their methods"},
	{"engine", []string{"lmcache"}, lmcacheAbove},
	{"devices", []string{"lmcache"}, lmcacheAbove},
	{"placement", []string{"lmcache"}, lmcacheAbove},
	{"blockdev", []string{"lmcache"}, lmcacheAbove},
	{"cache", []string{"lmcache"}, lmcacheAbove},
}

// lmcacheAbove: the LMCache config package builds on these; none of them reads a config.
const lmcacheAbove = "the LMCache config (lmcache) sits above the engine, devices, placement, blockdev and cache"

// importRuleViolations lists the imports of files that break importRules.
func importRuleViolations(files []goFile) []string {
	var v []string
	for _, f := range files {
		for _, r := range importRules {
			if !under(f.dir, r.from) {
				continue
			}
			for _, imp := range f.imports() {
				for _, to := range r.to {
					if under(imp, to) {
						v = append(v, f.path+" imports "+imp+" ("+r.why+")")
					}
				}
			}
		}
	}
	return v
}

// (h) Reports import no engine, workloads no engine, the CLI no nvme or ftl, and nothing
// below it the LMCache config.
func TestImportRules(t *testing.T) {
	report(t, "imports the layers forbid", importRuleViolations(sources(t)))
}

// (i) Tests attach loop devices through internal/looptest only: one place checks root and
// losetup, skips with the reason and detaches.
func TestLoopDevicesThroughLooptest(t *testing.T) {
	root := moduleRoot(t)
	var v []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if under(filepath.ToSlash(filepath.Dir(rel)), "internal/looptest") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The needles are split so that this file does not match itself.
		if bytes.Contains(src, []byte(`"losetup", `+`"--find"`)) || bytes.Contains(src, []byte("LOOP_CTL_"+"GET_FREE")) {
			v = append(v, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	report(t, "tests attaching loop devices by hand (use internal/looptest)", v)
}

// flagName matches a CLI flag in a message: "--" and a lower-case letter.
var flagName = regexp.MustCompile(`--[a-z]`)

// (e) A library error states facts; naming the flag is the CLI's job (hints.go).
func TestLibraryErrorsNameNoFlag(t *testing.T) {
	report(t, "library error strings naming a flag", libraryErrorsMatching(t, flagName))
}

// libraryErrorsMatching lists the error literals of library packages that re matches.
func libraryErrorsMatching(t *testing.T, re *regexp.Regexp) []string {
	var v []string
	for _, f := range sources(t) {
		if !isLibrary(f.dir) {
			continue
		}
		for _, msg := range errorLiterals(f.fset, f.ast) {
			if re.MatchString(msg.text) {
				v = append(v, f.path+":"+strconv.Itoa(msg.line)+": "+strconv.Quote(msg.text))
			}
		}
	}
	return v
}

// commandName matches an rbctl command in a message ("rbctl format", "rbctl recover").
var commandName = regexp.MustCompile(`rbctl (format|inspect|recover|put|get|ls|rm|bench|simulate|serve|remote|emu|fdp|fdp-status|torture|identify|nvme|cluster-bench)\b`)

// (f) Nor does it name a command: what to run next is the CLI's hint.
func TestLibraryErrorsNameNoCommand(t *testing.T) {
	report(t, "library error strings naming an rbctl command", libraryErrorsMatching(t, commandName))
}

// (g) The CLI's hints find what an error is by its type (errors.Is/As), never by reading
// its message: hints.go calls no Error().
func TestHintsReadNoMessage(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		if f.path != cliDir+"/hints.go" {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(call.Args) == 0 {
					v = append(v, f.path+":"+strconv.Itoa(f.fset.Position(call.Pos()).Line)+": .Error()")
				}
			}
			return true
		})
	}
	report(t, "hints reading an error's message", v)
}

type literal struct {
	text string
	line int
}

// errorLiterals returns the string literals in the format or message argument of every
// errors.New and fmt.Errorf call in f (with the import names f uses).
func errorLiterals(fset *token.FileSet, f *ast.File) []literal {
	names := map[string]string{"errors": "errors", "fmt": "fmt"}
	for _, s := range f.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		if (p == "errors" || p == "fmt") && s.Name != nil {
			names[p] = s.Name.Name
		}
	}
	var out []literal
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if !(pkg.Name == names["errors"] && sel.Sel.Name == "New") && !(pkg.Name == names["fmt"] && sel.Sel.Name == "Errorf") {
			return true
		}
		ast.Inspect(call.Args[0], func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, literal{s, fset.Position(lit.Pos()).Line})
				}
			}
			return true
		})
		return true
	})
	return out
}

// The checkers themselves: each finds what it is meant to find in a made-up file.
func TestCheckersFindViolations(t *testing.T) {
	src := `package x

import (
	stderr "errors"
	"fmt"
	"github.com/rbctl/rbctl/tools/vmtest"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/cli"
)

var a = stderr.New("pass --force " + "to do it")
var b = fmt.Errorf("size %d: too big", 1)
var c = fmt.Errorf("%w; use --io-engine", b)
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var flagged []int
	for _, l := range errorLiterals(fset, f) {
		if flagName.MatchString(l.text) {
			flagged = append(flagged, l.line)
		}
	}
	if len(flagged) != 2 || flagged[0] != 10 || flagged[1] != 12 {
		t.Errorf("flag-naming literals on lines %v, want [10 12]", flagged)
	}
	g := goFile{ast: f}
	if imps := g.imports(); len(imps) != 2 || imps[0] != "tools/vmtest" || imps[1] != "cmd/rbctl/internal/cli" {
		t.Errorf("imports %q", imps)
	}
	for _, c := range []struct {
		dir, imp string
		bad      bool
	}{{"reports/cachereport", "engine", true}, {"reports", "engine/sharded", true}, {"workloads", "engine", true},
		{cliDir, "ftl", true}, {cliDir, "nvme", true}, {"cmd/rbctl/internal/flagsets", "ftl", true}, {cliDir, "nvmetcp", false}, {"cache", "engine", false}, {"reportsx", "engine", false},
		{"engine/sharded", "lmcache", true}, {"cache", "lmcache", true}, {"placement", "lmcache", true}, {"devices/safety", "lmcache", true},
		{"blockdev/faultdev", "lmcache", true}, {"bench", "lmcache", false}, {"sim", "lmcache", false}, {"cachex", "lmcache", false}} {
		src := "package x\nimport _ \"" + module + "/" + c.imp + "\"\n"
		af, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(importRuleViolations([]goFile{{path: c.dir + "/x.go", dir: c.dir, ast: af}})) > 0; got != c.bad {
			t.Errorf("%s importing %s: violation %v, want %v", c.dir, c.imp, got, c.bad)
		}
	}
	if !isLibrary("engine") || isLibrary("internal/uring") || isLibrary("cmd/rbctl") || isLibrary("tools/benchio") || !isLibrary("") {
		t.Error("isLibrary misclassifies")
	}
	if !isGenerated([]byte("// Code generated by x. DO NOT EDIT.\n\npackage x\n")) || isGenerated([]byte("package x\n// Code generated by x. DO NOT EDIT.\n")) {
		t.Error("isGenerated misclassifies")
	}
	if countLines([]byte("a\nb")) != 2 || countLines([]byte("a\nb\n")) != 2 {
		t.Error("countLines")
	}
}
