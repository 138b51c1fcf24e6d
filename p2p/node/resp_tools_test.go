package node

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// redis-benchmark's SET and GET of 256 KiB values, 16 clients, 4 requests in flight each,
// against a node's RESP front end (node.Start, as rbctl serve --resp) on a file and on an
// emulated FDP SSD: every request answered, none an error.
func TestRESPRedisBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-benchmark")
	}
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Skip("needs redis-benchmark (Debian redis-tools; make setup installs it)")
	}
	dir := t.TempDir()
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 260<<10, 0
	file := filepath.Join(dir, "c.img")
	for _, dev := range []string{file, "emu:" + filepath.Join(dir, "e.img") + "?size=256M&ru=4M&ruhs=8"} {
		o := cache.FormatOptions{Path: dev, Config: cfg, Open: func() (blockdev.Device, error) { return devices.Open(dev, devices.DefaultOptions()) }}
		if dev == file {
			o.Create = 64 << 20
		}
		if _, _, err := cache.Format(o); err != nil {
			t.Fatal(err)
		}
		c := startConfig(dev)
		c.RESP = &RESPConfig{Listen: "127.0.0.1:0"}
		n, err := Start(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		h, p, _ := net.SplitHostPort(n.RESPAddr())
		out, err := exec.Command(bench, "-h", h, "-p", p, "-t", "set,get", "-d", "262144", "-c", "16", "-P", "4", "-n", "400", "-q").CombinedOutput()
		if err != nil || strings.Contains(strings.ToLower(string(out)), "error") || !strings.Contains(string(out), "SET: ") || !strings.Contains(string(out), "GET: ") {
			t.Errorf("redis-benchmark against the node's RESP on %s: %v\n%s", dev, err, out)
		}
		t.Logf("%s: %s", dev, strings.Join(strings.Fields(string(out)), " "))
		if err := n.Close(); err != nil {
			t.Errorf("close %s: %v", dev, err)
		}
	}
}
