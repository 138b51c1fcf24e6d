package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNSIDAlias: --nsid still sets --namespace-id on identify, nvme log and fdp status,
// and help shows only --namespace-id.
func TestNSIDAlias(t *testing.T) {
	for _, args := range [][]string{
		{"identify", "emu:mem?size=64M&ru=1M", "--nsid", "1", "--json"},
		{"nvme", "log", "emu:mem?size=64M&ru=1M", "--lid", "0x22", "--lsi", "1", "--len", "64", "--nsid", "0"},
		{"fdp", "status", "emu:mem?size=64M&ru=1M&ruhs=2", "--nsid", "1", "-o", "json"},
	} {
		if out, err := runFDPCLI(t, args...); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	out, err := runFDPCLI(t, "nvme", "log", "emu:mem?size=64M&ru=1M", "--lid", "0x22", "--lsi", "1", "--len", "64", "--nsid", "7", "--json")
	if err != nil || !strings.Contains(out, `"nsid": 7`) {
		t.Errorf("--nsid 7 did not reach the command: %v\n%s", err, out)
	}
	help, _ := runFDPCLI(t, "identify", "--help")
	if strings.Contains(help, "--nsid") || !strings.Contains(help, "-n, --namespace-id") {
		t.Errorf("identify help:\n%s", help)
	}
}

// The flags renamed for one name per concept keep their old spellings, hidden: a legacy
// cache formatted with --namespace, a chunk put with --model and read with --model-name,
// inspect --keys; the new names appear in help, the old ones do not.
func TestRenamedFlagsKeepOldSpellings(t *testing.T) {
	dir := t.TempDir()
	mustRbctl(t, dir, "format", "--create", "8M", "--slot-bytes", "64K", "--namespace", "object", "c.img")
	if err := os.WriteFile(filepath.Join(dir, "v.bin"), []byte("value"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRbctl(t, dir, "put", "c.img", "--model", "m", "--hash", "01", "v.bin")
	if code, so, se := runRbctl(t, dir, 30*time.Second, "get", "c.img", "--model-name", "m", "--hash", "01"); code != 0 || so != "value" {
		t.Errorf("get --model-name: exit %d, %q %s", code, so, se)
	}
	code, so, se := runRbctl(t, dir, 30*time.Second, "inspect", "c.img", "--keys", "--json")
	if code != 0 || !strings.Contains(so, `"object"`) || !strings.Contains(so, "m@") {
		t.Errorf("inspect --keys of a --namespace object cache: exit %d, %s %s", code, so, se)
	}
	for cmd, flags := range map[string][2]string{"format": {"--key-namespace", "--namespace "}, "put": {"--model-name", "--model "},
		"inspect": {"--list-keys", "--keys "}} {
		_, help, _ := runRbctl(t, dir, 30*time.Second, cmd, "--help")
		if !strings.Contains(help, flags[0]) || strings.Contains(help, flags[1]) {
			t.Errorf("%s --help: want %s shown and %s hidden", cmd, flags[0], flags[1])
		}
	}
}
