package flagsets

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
)

func TestKeyBuild(t *testing.T) {
	for _, c := range []struct {
		k       Key
		ns      engine.Namespace
		want    string // the key, or a substring of the error
		wantErr bool
	}{
		{Key{Model: "m", Hash: "0xaa"}, engine.NamespaceObject, "m@0x00000000@aa", false},
		{Key{Model: "my/model", Rank: 2, Hash: "00ff", Salt: "t"}, engine.NamespaceObject, "my%2Fmodel@0x00000002@00ff@t", false},
		{Key{Key: "m@0x00000000@aa"}, engine.NamespaceObject, "m@0x00000000@aa", false},
		{Key{Key: "k", Model: "m"}, engine.NamespaceObject, "not both", true},
		{Key{Model: "m", Hash: "abc"}, engine.NamespaceObject, "--hash", true},
		{Key{Model: "m"}, engine.NamespaceObject, "--model-name and --hash are both required", true},
		{Key{Model: "m", Hash: "aa"}, engine.NamespaceLegacy, "legacy namespace", true},
		{Key{}, engine.NamespaceObject, "no key given", true},
	} {
		k, err := c.k.Build(c.ns)
		switch {
		case c.wantErr && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: err %v, want one with %q", c.k, err, c.want)
		case !c.wantErr && (err != nil || k.String() != c.want):
			t.Errorf("%+v: %q, %v; want %q", c.k, k.String(), err, c.want)
		}
	}
}

func TestKeyPrecheckAndWire(t *testing.T) {
	for k, want := range map[Key]string{
		{Key: "a\x01b"}: "control character",
		{Key: strings.Repeat("x", engine.MaxKeyBytes+1)}: "longer than",
		{Key: "m@0x00000000@aa", Salt: "s"}:              "not both",
		{Model: "m", Hash: "zz"}:                         "--hash",
	} {
		if err := k.Precheck(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: Precheck %v, want %q", k.Key+k.Model, err, want)
		}
	}
}

func TestPlacement(t *testing.T) {
	var nilFlag *Placement
	if !nilFlag.None() || nilFlag.Check() != nil || !(&Placement{Spec: " None "}).None() {
		t.Error("nil, blank and none mean no placement")
	}
	if err := (&Placement{Spec: "no-such-policy"}).Check(); err == nil || !strings.HasPrefix(err.Error(), "--placement no-such-policy: ") {
		t.Errorf("unknown policy: %v", err)
	}
	if got, err := Policies(" none, ,cache-salt,"); err != nil || strings.Join(got, "|") != "none|cache-salt" {
		t.Errorf("Policies: %q, %v", got, err)
	}
	if _, err := Policies(" , "); err == nil || !strings.Contains(err.Error(), "at least one policy") {
		t.Errorf("Policies of nothing: %v", err)
	}
}

func TestReadInput(t *testing.T) {
	ctx := context.Background()
	if b, err := ReadInput(ctx, strings.NewReader("hello"), nil, 8); err != nil || string(b) != "hello" {
		t.Errorf("stdin: %q, %v", b, err)
	}
	if _, err := ReadInput(ctx, strings.NewReader(""), nil, 8); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty: %v", err)
	}
	// Over the cap: refused after max+1 bytes, however much more there is.
	src := &countingReader{left: 1 << 30}
	if _, err := ReadInput(ctx, src, []string{"-"}, 64<<10); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("over the cap: %v", err)
	}
	if src.read > 64<<10+1 {
		t.Errorf("read %d bytes of an over-long input, want at most %d", src.read, 64<<10+1)
	}
	// A FIFO no one writes: open(2) blocks; cancelling stops the read at once.
	fifo := filepath.Join(t.TempDir(), "in")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go cancel()
	if _, err := ReadInput(cctx, strings.NewReader(""), []string{fifo}, 8); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting on a FIFO: %v", err)
	}
}

// countingReader yields left zero bytes and counts what was read.
type countingReader struct{ left, read int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	n = min(n, r.left)
	r.left -= n
	r.read += n
	return int(n), nil
}

func TestNVMeOutputMode(t *testing.T) {
	for args, want := range map[string]string{"": "normal", "-o JSON": "json", "-o binary": "binary", "--json": "json", "-b -o json": "binary", "-o xml": "error"} {
		var o NVMeOutput
		cmd := &cobra.Command{Use: "x"}
		o.Add(cmd)
		if err := cmd.ParseFlags(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		got, err := o.Mode()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%q: mode %q (%v), want %q", args, got, err, want)
		}
	}
}

// Text and Optional hand the text to the value's own UnmarshalText; Optional leaves the
// value nil (the library's choice) unless the flag is given, even given as its default.
func TestTextAndOptionalFlags(t *testing.T) {
	var gc ftl.GCPolicy
	var iso *ftl.Isolation
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Var(Text(&gc, "greedy"), "gc", "")
	fs.Var(Optional(&iso, "initial"), "isolation", "")
	if err := fs.Parse(nil); err != nil || gc != ftl.Greedy || iso != nil || fs.Lookup("isolation").DefValue != "initial" {
		t.Fatalf("defaults: %v %v %v", err, gc, iso)
	}
	if err := fs.Parse([]string{"--gc", "cb", "--isolation", "initial"}); err != nil || gc != ftl.CostBenefit || iso == nil || *iso != ftl.InitiallyIsolated {
		t.Fatalf("given: %v %v %v", err, gc, iso)
	}
	if err := fs.Parse([]string{"--isolation", "sideways"}); err == nil || !strings.Contains(err.Error(), "unknown isolation") {
		t.Fatalf("bad value: %v", err)
	}
}
