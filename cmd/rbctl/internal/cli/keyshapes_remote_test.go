package cli

import (
	"path/filepath"
	"testing"
	"time"
)

// Issue 29's keys over P2P: remote put on node a of an object-group key, a key with a rank
// past 32 bits and a native-spelled key, remote get through node b (a peer fetch from a,
// nodes naming keys by their encoded string).
func TestServeRemoteEveryKeyShape(t *testing.T) {
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
	_, ctlA, dataA := startServe(t, dir, a)
	_, ctlB, _ := startServe(t, dir, b, "--peers", ctlA+"/"+dataA)
	for _, key := range [][]string{
		{"--key", "m@0x00000000@1@00ff"},
		{"--key", "m@0x100030803@0@00ff@rag:a"},
		{"--model", "m", "--rank", "0x100030803", "--group", "16", "--hash", "01ff", "--salt", "ab"},
		{"--native-key", "my/model@00000001@0@deadbeef@tenant"},
	} {
		if code, _, se := runRbctl(t, dir, 30*time.Second, append([]string{"remote", "put", "--server", ctlA, "-"}, key...)...); code != 0 {
			t.Fatalf("remote put %v: exit %d: %s", key, code, se)
		}
		if code, so, se := runRbctl(t, dir, 30*time.Second, append([]string{"remote", "get", "--server", ctlB}, key...)...); code != 0 || so != "payload\n" {
			t.Fatalf("remote get %v through b: exit %d, stdout %q, stderr %q", key, code, so, se)
		}
	}
}
