package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"
)

// assemblers are the constructors that put a cache, a node or a server together from parts.
// The CLI (cmd/rbctl/internal/cli and flagsets) calls none of them: it calls node.Start,
// cache.Open and cache.Format, which assemble, and renders what they return (issue 36).
var assemblers = map[string][]string{
	"engine":         {"Open", "Format"},
	"engine/sharded": {"New", "Open", "Format"},
	"p2p/node":       {"New", "NewSharded"},
	"p2p/dataplane":  {"NewServer"},
	"p2p/cluster":    {"Join", "JoinFunc"},
	"p2p/resp":       {"NewBudget"},
}

// assembling lists the calls of f to an assembler, and its p2p/resp.Server literals.
func assembling(f goFile) []string {
	names := map[string]string{} // local name → module-relative import path
	for _, s := range f.ast.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		rest, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			continue
		}
		local := path.Base(rest)
		if s.Name != nil {
			local = s.Name.Name
		}
		names[local] = rest
	}
	var v []string
	ast.Inspect(f.ast, func(n ast.Node) bool {
		var sel *ast.SelectorExpr
		switch x := n.(type) {
		case *ast.CallExpr:
			sel, _ = x.Fun.(*ast.SelectorExpr)
		case *ast.CompositeLit:
			if s, ok := x.Type.(*ast.SelectorExpr); ok && s.Sel.Name == "Server" {
				if id, ok := s.X.(*ast.Ident); ok && names[id.Name] == "p2p/resp" {
					v = append(v, f.path+": resp.Server{...}")
				}
			}
		}
		if sel == nil {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		for _, fn := range assemblers[names[id.Name]] {
			if sel.Sel.Name == fn {
				v = append(v, f.path+": "+id.Name+"."+fn)
			}
		}
		return true
	})
	return v
}

// (j) No package below the CLI is assembled by the CLI.
func TestCLIAssemblesNothing(t *testing.T) {
	var v []string
	for _, f := range sources(t) {
		if under(f.dir, cliDir) || under(f.dir, "cmd/rbctl/internal/flagsets") {
			v = append(v, assembling(f)...)
		}
	}
	report(t, "calls by the CLI that assemble a cache, a node or a server (call node.Start, cache.Open)", v)
}

func TestAssemblingSeesCalls(t *testing.T) {
	src := `package x
import (
	"github.com/rbctl/rbctl/engine"
	nd "github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/p2p/resp"
	"github.com/rbctl/rbctl/cache"
)
func f() {
	engine.Open(nil, engine.Config{})
	nd.NewSharded(nil, nd.Config{})
	nd.Start(nil, nd.Config{})
	cache.Open("", cache.OpenOptions{})
	_ = &resp.Server{}
}`
	af, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := assembling(goFile{path: "x.go", ast: af})
	if strings.Join(got, ",") != "x.go: engine.Open,x.go: nd.NewSharded,x.go: resp.Server{...}" {
		t.Errorf("found %q", got)
	}
}
