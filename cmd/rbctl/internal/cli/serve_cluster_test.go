package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestServeNodesFindEachOther runs two `rbctl serve --cluster lab` processes with no --peers:
// they join the cluster through the registry directory (XDG_RUNTIME_DIR, the test's own),
// learn each other's key digests, and a get on b of a chunk put on a is a peer hit. (Without
// --cluster, --join or --peers a node stands alone: flagsets.TestJoinClusterOnlyWhenTold.)
func TestServeNodesFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, dev := range []string{a, b} {
		if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
			t.Fatalf("format: exit %d: %s", code, se)
		}
	}
	_, ctlA, _ := startServe(t, dir, a, "--node-name", "a", "--cluster", "lab")
	_, ctlB, _ := startServe(t, dir, b, "--node-name", "b", "--cluster", "lab")
	remote := func(args ...string) (int, string, string) {
		return runRbctl(t, dir, 30*time.Second, append([]string{"remote"}, args...)...)
	}
	if code, _, se := remote("put", "--server", ctlA, "--model", "m", "--hash", "0a0b", "--salt", "t", "-"); code != 0 {
		t.Fatalf("remote put: exit %d: %s", code, se)
	}
	// Membership and the digest travel by gossip: poll (a miss is exit 3, and is retried).
	deadline := time.Now().Add(40 * time.Second)
	for {
		code, so, se := remote("get", "--server", ctlB, "--model", "m", "--hash", "0a0b", "--salt", "t")
		if code == 0 {
			if so != "payload\n" {
				t.Fatalf("get on b: %q", so)
			}
			break
		}
		if code != exitNotFound || time.Now().After(deadline) {
			t.Fatalf("get on b: exit %d, %s", code, se)
		}
		time.Sleep(300 * time.Millisecond)
	}
	code, so, _ := remote("stats", "--server", ctlB, "--json")
	var st struct{ Counters map[string]int64 }
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil || st.Counters["peer_hits"] != 1 {
		t.Fatalf("remote stats on b: exit %d, %s", code, so)
	}
}
