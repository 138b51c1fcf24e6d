package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/bench"
	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads"
)

// The write path of one bench put, from a real run: bench's engine backend driven by the
// workload driver puts one chunk into a cache on the emulated FDP SSD, with a cache-salt
// policy. Two capture points record runtime.Callers: the placement decision (a Policy that
// delegates to the real one) and the data write (an nvme.Transport that delegates to the
// emulator). The frames are mapped to packages; each package is listed once, in call order.

// step is one package on the path, with the functions the run passed through in it.
type step struct {
	pkg   string
	funcs []string
	note  string
}

const selfPkg = "tools/archdoc"

// stackSteps captures the caller's stack as package steps, outermost first, leaving out
// frames outside the module and this package's own.
func stackSteps(skip int) []step {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(skip+1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var rev []step
	for {
		fr, more := frames.Next()
		if p, fn, ok := splitFunc(fr.Function); ok && p != selfPkg {
			if len(rev) > 0 && rev[len(rev)-1].pkg == p {
				rev[len(rev)-1].funcs = append(rev[len(rev)-1].funcs, fn)
			} else {
				rev = append(rev, step{pkg: p, funcs: []string{fn}})
			}
		}
		if !more {
			break
		}
	}
	out := make([]step, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		s := rev[i]
		for a, b := 0, len(s.funcs)-1; a < b; a, b = a+1, b-1 {
			s.funcs[a], s.funcs[b] = s.funcs[b], s.funcs[a]
		}
		out = append(out, s)
	}
	return out
}

// createdBy returns the module function that started the calling goroutine ("" if none),
// from the "created by" line of its stack.
func createdBy() string {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	for _, line := range strings.Split(string(buf), "\n") {
		if f, ok := strings.CutPrefix(line, "created by "); ok {
			f, _, _ = strings.Cut(f, " in goroutine")
			if p, fn, ok := splitFunc(f); ok {
				return p + "." + fn
			}
		}
	}
	return ""
}

// splitFunc splits "github.com/rbctl/rbctl/engine.(*Engine).PutMany" into "engine" and
// "(*Engine).PutMany".
func splitFunc(name string) (string, string, bool) {
	r, ok := strings.CutPrefix(name, module+"/")
	if !ok {
		return "", "", false
	}
	slash := strings.LastIndex(r, "/")
	dot := strings.Index(r[slash+1:], ".")
	if dot < 0 {
		return "", "", false
	}
	return r[:slash+1+dot], r[slash+1+dot+1:], true
}

// pkgOf is the module-relative package of v's dynamic type.
func pkgOf(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p, _ := rel(t.PkgPath())
	return p
}

type capture struct {
	mu         sync.Mutex
	armed      bool
	place      []step // stack at the placement decision
	write      []step // stack at the data write
	policyPkg  string
	policyName string
	handle     placement.Handle
	// the transport under the capturing one
	transportPkg, transportType string
	dataBase                    uint64 // writes below it are metadata
	createdBy                   string // the function that started the writing goroutine
	dspec, dtyp                 uint32
}

type capturePolicy struct {
	inner placement.Policy
	c     *capture
}

func (p capturePolicy) Name() string { return p.inner.Name() }
func (p capturePolicy) Place(w placement.Write) placement.Handle {
	h := p.inner.Place(w)
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.c.armed && p.c.place == nil && !w.Metadata {
		p.c.place, p.c.handle = stackSteps(2), h
		p.c.policyPkg, p.c.policyName = pkgOf(p.inner), p.inner.Name()
	}
	return h
}

type captureTransport struct {
	nvme.Transport
	c *capture
}

func (t captureTransport) IO(cmds []nvme.Command, done []nvme.Completion) {
	t.c.mu.Lock()
	if t.c.armed && t.c.write == nil && len(cmds) > 0 && cmds[0].Opcode == nvme.OpWrite &&
		(uint64(cmds[0].CDW11)<<32|uint64(cmds[0].CDW10))*4096 >= t.c.dataBase {
		t.c.write, t.c.createdBy = stackSteps(2), createdBy()
		t.c.dtyp, t.c.dspec = cmds[0].CDW12>>20&0xf, cmds[0].CDW13>>16
	}
	t.c.mu.Unlock()
	t.Transport.IO(cmds, done)
}

// onePut generates a single put of one chunk for tenant 0.
type onePut struct {
	done bool
	size int
}

func (g *onePut) Next(op *workloads.Op) bool {
	if g.done {
		return false
	}
	g.done = true
	*op = workloads.Op{Kind: workloads.KindPut, Keys: []workloads.Key{{Hash: 0x2a}}, Size: g.size}
	return true
}
func (g *onePut) Salts() []string { return []string{"tenant-a"} }
func (g *onePut) ChunkBytes() int { return g.size }

// metaBytes is the metadata region of the traced caches: writes at or past it are data.
const metaBytes = 1 << 20

// openCaptured opens a new emulated FDP SSD through a capturing transport.
func openCaptured(t *testing.T) (*nvme.Device, *capture) {
	t.Helper()
	spec := "emu:" + filepath.Join(t.TempDir(), "fdp.img") + "?size=64M&ru=1M&ruhs=4"
	if _, err := emu.Create(spec); err != nil {
		t.Fatal(err)
	}
	ctrl, err := emu.OpenWith(spec, emu.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := fdp.Discover(ctrl)
	if err != nil {
		ctrl.Close()
		t.Fatal(err)
	}
	c := &capture{transportPkg: pkgOf(ctrl), transportType: "(" + fmt.Sprintf("%T", ctrl) + ")", dataBase: metaBytes}
	dev, err := nvme.NewDevice(captureTransport{ctrl, c}, nvme.DeviceOptions{Path: spec, Kind: blockdev.KindEmulated, PIDs: disc.PIDs})
	if err != nil {
		ctrl.Close()
		t.Fatal(err)
	}
	return dev, c
}

// traceBench runs bench.Run for one request of one put on a captured device and returns the
// stack of its first data write.
func traceBench(t *testing.T) *capture {
	t.Helper()
	dev, c := openCaptured(t)
	defer dev.Close()
	c.armed = true
	rep, err := bench.Run(context.Background(), bench.Options{Device: dev, Policies: []string{"cache-salt"}, QueueDepth: 8, MetaBytes: metaBytes,
		Workload: workloads.Spec{Kind: "uniform", Model: "tiny", ChunkTokens: 16, Keys: 4, ValueSize: 32 << 10, SyntheticTenants: 2, Requests: 1, Util: 0.9, Workers: 1, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Failed() {
		t.Fatalf("bench run: %+v", rep.Runs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.write == nil {
		t.Fatal("bench wrote no data")
	}
	return c
}

// tracePut runs one put through bench's engine backend and the workload driver, with a
// capturing policy, and returns the captures.
func tracePut(t *testing.T) *capture {
	t.Helper()
	dev, c := openCaptured(t)
	pol, err := placement.Parse("cache-salt", dev.Info().Handles)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 64<<10, metaBytes, false
	cfg.DevicePath, cfg.Placer = dev.Info().Path, capturePolicy{pol, c}
	e, err := engine.Format(dev, cfg)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	defer e.Close()
	gen := &onePut{size: 32 << 10}
	d, err := workloads.NewDriver(workloads.DriverConfig{Workers: 1, MaxOps: 1, Seed: 1}, gen, bench.NewBackend(e, "trace/model", gen.Salts(), gen.size))
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
	if _, err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if c.place == nil || c.write == nil {
		t.Fatalf("the put was not captured (placement %v, write %v)", c.place != nil, c.write != nil)
	}
	return c
}

// path merges a write capture w and a placement capture p: the write's stack, with the
// decision after the package that asked for it, then the transport's package. A package
// the write passes through again (bench's shadow device) is noted at its first visit.
func path(w, p *capture) []step {
	var out []step
	at := map[string]int{}
	prev := "" // the write stack's previous package
	add := func(s step) {
		if i, ok := at[s.pkg]; ok {
			out[i].note = strings.TrimPrefix(out[i].note+"; ", "; ") + "again, called by " + prev + ": " + strings.Join(s.funcs, " → ")
			return
		}
		at[s.pkg] = len(out)
		out = append(out, s)
	}
	asker := last(p.place).pkg
	for i, s := range w.write {
		if i == 0 && w.createdBy != "" {
			s.note = "the writing goroutine was started by " + w.createdBy
		}
		add(s)
		prev = s.pkg
		if s.pkg == asker {
			if _, done := at[p.policyPkg]; !done {
				fns := last(p.place).funcs
				add(step{pkg: p.policyPkg, funcs: []string{"policy " + p.policyName + ": Place"},
					note: fmt.Sprintf("the placement decision (handle %d), asked by %s.%s", p.handle, asker, fns[len(fns)-1])})
			}
		}
	}
	add(step{pkg: w.transportPkg, funcs: []string{w.transportType + ".IO"},
		note: fmt.Sprintf("the transport takes the Write (DTYPE %d, DSPEC %d); on the emulated SSD its FTL model places it, on /dev/ngXnY this is nvme's uring_cmd transport over internal/uring", w.dtyp, w.dspec)})
	return out
}

func last(s []step) step { return s[len(s)-1] }

func writePathMarkdown(steps []step) string {
	var b strings.Builder
	b.WriteString("| # | package | functions on the path (outermost first) | note |\n|---|---|---|---|\n")
	for i, s := range steps {
		fn := strings.Join(s.funcs, " → ")
		if len(s.funcs) > 4 {
			fn = strings.Join(s.funcs[:2], " → ") + " → … → " + strings.Join(s.funcs[len(s.funcs)-2:], " → ")
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", i+1, s.pkg, strings.ReplaceAll(fn, "|", "\\|"), s.note)
	}
	return b.String()
}

func TestWritePath(t *testing.T) {
	w, p := traceBench(t), tracePut(t)
	steps := path(w, p)
	var pkgs []string
	for _, s := range steps {
		pkgs = append(pkgs, s.pkg)
	}
	got := " " + strings.Join(pkgs, " ") + " "
	// The shape the layout promises: the driver above bench's backend above the engine,
	// which asks placement and then writes through nvme.
	for _, w := range [][2]string{{"workloads", "bench"}, {"bench", "engine"}, {"engine", "placement"}, {"placement", "nvme"}, {"nvme", "emu"}} {
		i, j := strings.Index(got, " "+w[0]+" "), strings.Index(got, " "+w[1]+" ")
		if i < 0 || j < 0 || i > j {
			t.Errorf("write path %q: want %s before %s", got, w[0], w[1])
		}
	}
	if w.dtyp != 2 || p.handle < 0 {
		t.Errorf("the data write carries DTYPE %d (want 2, data placement); placement handle %d", w.dtyp, p.handle)
	}
	if os.Getenv("RBCTL_ARCHDOC_TRACE") != "1" {
		return
	}
	root := filepath.Join("..", "..")
	file := filepath.Join(root, docPath)
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, err := replaceSection(string(doc), "archdoc:write-path", writePathMarkdown(steps))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGraphCurrent fails when docs/architecture.md's import graph is not what `go list`
// says today (make architecture regenerates it).
func TestGraphCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := listPackages(root)
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, docPath))
	if err != nil {
		t.Fatal(err)
	}
	if section(string(doc), "archdoc:graph") != graphMarkdown(pkgs) {
		t.Error("docs/architecture.md's import graph is stale; run make architecture")
	}
}

func TestLayers(t *testing.T) {
	for p, want := range map[string]int{"cmd/rbctl": layerEntry, "cmd/rbctl/internal/cli": layerApp, "engine": layerLib, ".": layerLib,
		"internal/uring": layerKernel, "internal/sys": layerKernel, "tools/benchio": layerTool, "tools/vmtest": layerTool} {
		if got := layerOf(p); got != want {
			t.Errorf("layerOf(%q) = %d, want %d", p, got, want)
		}
	}
	if p, fn, ok := splitFunc(module + "/engine.(*Engine).PutMany"); !ok || p != "engine" || fn != "(*Engine).PutMany" {
		t.Errorf("splitFunc: %q %q %v", p, fn, ok)
	}
	if p, _, _ := splitFunc(module + "/devices/safety.Gate"); p != "devices/safety" {
		t.Errorf("splitFunc nested: %q", p)
	}
	md := graphMarkdown([]pkg{{"engine", []string{"cmd/rbctl/internal/cli"}}, {"cmd/rbctl/internal/cli", []string{"engine"}}})
	if !strings.Contains(md, "point up a layer (to fix): `engine` → `cmd/rbctl/internal/cli`") {
		t.Errorf("an upward import is not reported:\n%s", md)
	}
}
