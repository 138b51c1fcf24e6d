package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/internal/testnet"
)

// TestTimeAgainstTheRealServe fills a small cache and times the real rbctl serve on it,
// stopped cleanly and then killed: the command line the tool gives serve must be one serve
// still accepts (a change to serve's --gossip checks made every run fail at once, unseen,
// until a benchmark was run by hand).
func TestTimeAgainstTheRealServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rbctl binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rbctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rbctl")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img := filepath.Join(dir, "cache.img")
	format := exec.Command(bin, "format", img, "--create", "4M", "--slot-bytes", "1K", "--header-bytes", "512", "--block-align", "512")
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("rbctl format: %v\n%s", err, out)
	}
	if err := fill([]string{"-dev", img, "-n", "100"}); err != nil {
		t.Fatal(err)
	}
	for _, stop := range []string{"int", "kill"} {
		args := []string{"-rbctl", bin, "-dev", img, "-stop", stop, "-resp", freeAddr(t), "-listen", freeAddr(t), "-timeout", "60s"}
		if err := timeRestart(args); err != nil {
			t.Fatalf("time -stop %s: %v", stop, err)
		}
	}
}

// freeAddr returns a loopback address for the server about to be started (testnet.Addr).
func freeAddr(t *testing.T) string { return testnet.Addr(t) }
