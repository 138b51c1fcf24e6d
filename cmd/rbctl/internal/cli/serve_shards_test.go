package cli

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/client"
)

// TestServeTwoDevices: serve a.img b.img serves the two-device cache with a row per device
// in remote stats; b.img alone, one shard of it, is refused with the reason.
func TestServeTwoDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "16K", a, b); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	srv, ctl, _ := startServe(t, dir, a, b, "--cluster", "none")
	c, err := client.Dial(ctl, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 100 {
		if err := c.Store(context.Background(), crashKey(i), crashPayload(i)); err != nil {
			t.Fatal(err)
		}
	}
	code, so, se := runRbctl(t, dir, 30*time.Second, "remote", "stats", "--server", ctl)
	if code != 0 || !strings.Contains(so, "device") {
		t.Fatalf("remote stats: exit %d\n%s%s", code, so, se)
	}
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u0, u1 := s.Counters["dev0_slots_used"], s.Counters["dev1_slots_used"]
	if s.Counters["devices"] != 2 || u0+u1 != 100 || u0 == 0 || u1 == 0 {
		t.Fatalf("counters %v", s.Counters)
	}
	t.Logf("remote stats of serve a.img b.img after 100 puts:\n%s", so)
	srv.Process.Signal(syscall.SIGINT)
	srv.Wait()
	code, _, se = runRbctl(t, dir, time.Minute, "serve", b, "--cluster", "none", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(se, "one shard of a larger cache") {
		t.Fatalf("serve of one shard alone: exit %d, %s", code, se)
	}
	t.Logf("serve b.img alone: exit %d: %s", code, strings.TrimSpace(se))
	code, _, se = runRbctl(t, dir, time.Minute, "serve", b, a, "--cluster", "none", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(se, "order and number they were formatted with") {
		t.Fatalf("serve of the shards out of order: exit %d, %s", code, se)
	}
}
