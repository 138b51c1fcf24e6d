package cli

import (
	"strings"
	"testing"
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
