package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
)

// TestServeShardsOnlyTogether: serve b.img alone, one shard of a two-device cache holding
// 100 keys (stored by a node started in process), is refused with the reason (exit 1), as
// are the shards out of order. (Serving a.img b.img, a row per device in remote stats, is
// p2p/node's TestStartTwoDevices.)
func TestServeShardsOnlyTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "16K", a, b); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	n, err := node.Start(context.Background(), node.Config{Name: "t", Devices: []string{a, b}, Listen: "127.0.0.1:0", Cluster: cluster.Config{Cluster: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k := engine.ObjectKey("m", 0, []byte(fmt.Sprintf("crash-%06d", i)), "t")
		if _, err := n.Put([]engine.Key{k}, [][]byte{crashPayload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, se := runRbctl(t, dir, time.Minute, "serve", b, "--cluster", "none", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(se, "one shard of a larger cache") {
		t.Fatalf("serve of one shard alone: exit %d, %s", code, se)
	}
	t.Logf("serve b.img alone: exit %d: %s", code, strings.TrimSpace(se))
	code, _, se = runRbctl(t, dir, time.Minute, "serve", b, a, "--cluster", "none", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(se, "order and number they were formatted with") {
		t.Fatalf("serve of the shards out of order: exit %d, %s", code, se)
	}
	// One device twice, under another name (a hard link, a symlink): refused as the same
	// device before anything is opened, not as held by this very process.
	if err := os.Link(a, filepath.Join(dir, "hard.img")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, filepath.Join(dir, "soft.img")); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"hard.img", "soft.img", a} {
		code, _, se = runRbctl(t, dir, time.Minute, "serve", a, other, "--cluster", "none", "--listen", "127.0.0.1:0")
		if code != 1 || !strings.Contains(se, "the same device is given twice") || strings.Contains(se, "in use by") {
			t.Fatalf("serve of %s and %s: exit %d, %s", a, other, code, se)
		}
	}
}
