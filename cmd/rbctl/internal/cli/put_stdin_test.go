package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPutReadsStdinBeforeTakingTheDevice: a put whose stdin is still open holds no lock, so
// another put and an ls run meanwhile; the first stores its input once it ends (third
// hostile battery: put held the device while it waited for stdin, refusing everyone).
func TestPutReadsStdinBeforeTakingTheDevice(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "c.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	slow := exec.Command(os.Args[0], "put", dev, "--key", "m@0x00000000@01", "-")
	slow.Dir = dir
	slow.Env = append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir, "XDG_STATE_HOME="+dir)
	in, err := slow.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	slow.Stdout, slow.Stderr = &out, &errOut
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	defer slow.Process.Kill()
	in.Write([]byte("the first half, "))
	time.Sleep(300 * time.Millisecond) // it has read the layout and waits for the rest
	mustRbctl(t, dir, "put", dev, "--key", "m@0x00000000@02", "-")
	if ls := mustRbctl(t, dir, "ls", dev); !strings.Contains(ls, "m@0x00000000@02") {
		t.Fatalf("ls while a put waits for stdin:\n%s", ls)
	}
	in.Write([]byte("then the rest"))
	in.Close()
	if err := slow.Wait(); err != nil || !strings.Contains(out.String(), "stored 29 bytes under m@0x00000000@01") {
		t.Fatalf("the waiting put: %v\n%s%s", err, out.String(), errOut.String())
	}
	got := mustRbctl(t, dir, "get", dev, "--key", "m@0x00000000@01")
	if got != "the first half, then the rest" {
		t.Fatalf("get: %q", got)
	}
}
