package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecoverRescuesWhatTheFallbackWouldLose is the third hostile battery's case: the
// newest checkpoint is damaged (one byte of its key dictionary, so its index spells every
// key wrong) and holds one key the older lacks. recover takes that key back from its slot
// (its header's key record spells it) instead of writing the older index and losing it;
// when its slot holds something else since, recover refuses without --force and writes
// nothing.
func TestRecoverRescuesWhatTheFallbackWouldLose(t *testing.T) {
	for _, rewritten := range []bool{false, true} {
		dir := t.TempDir()
		dev := filepath.Join(dir, "b.img")
		mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
		payload := bytes.Repeat([]byte("rescue me "), 3000)
		in := filepath.Join(dir, "p")
		if err := os.WriteFile(in, payload, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"01", "02", "03", "77"} {
			mustRbctl(t, dir, "put", dev, "--key", "m@0x00000000@"+k, in)
		}
		var ins struct {
			Containers []struct {
				Offset int64  `json:"offset"`
				Seq    uint64 `json:"seq"`
			} `json:"containers"`
			Keys []struct {
				Key    string `json:"key"`
				Offset int64  `json:"offset"`
			} `json:"keys"`
		}
		if err := json.Unmarshal([]byte(mustRbctl(t, dir, "inspect", "--json", "--list-keys", dev)), &ins); err != nil || len(ins.Containers) != 2 {
			t.Fatalf("inspect --json: %v", err)
		}
		newest := ins.Containers[0]
		if ins.Containers[1].Seq > newest.Seq {
			newest = ins.Containers[1]
		}
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff}, newest.Offset+4096+120); err != nil {
			t.Fatal(err)
		}
		if rewritten {
			off := int64(-1)
			for _, e := range ins.Keys {
				if e.Key == "m@0x00000000@77" {
					off = e.Offset
				}
			}
			// The slot was written again since: another identity in its header.
			if _, err := f.WriteAt([]byte{0x5a}, off+8); off < 0 || err != nil {
				t.Fatalf("offset %d: %v", off, err)
			}
		}
		f.Close()
		if !rewritten {
			out := mustRbctl(t, dir, "recover", dev)
			if !strings.Contains(out, "rescued m@0x00000000@77: only the rejected container listed it; its slot verified") || !strings.Contains(out, "repaired checkpoint written") {
				t.Fatalf("recover:\n%s", out)
			}
			mustRbctl(t, dir, "get", dev, "--key", "m@0x00000000@77", "-o", filepath.Join(dir, "out"))
			if got, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("the rescued key reads back %d bytes, %v", len(got), err)
			}
			continue
		}
		refused(t, dir, "loses 1 keys that the rejected container", "recover", dev)
		code, out, errOut := runRbctl(t, dir, time.Minute, "recover", "--force", dev)
		if code != 0 || !strings.Contains(out, "not rescued m@0x00000000@77") {
			t.Fatalf("recover --force: exit %d\n%s%s", code, out, errOut)
		}
	}
}

// TestRecoverSaysWhenScanIsNotUsed: --scan on a cache whose checkpoint is usable rebuilds
// nothing from the slot headers, and recover says so instead of ignoring it silently.
func TestRecoverSaysWhenScanIsNotUsed(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "c.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	code, _, errOut := runRbctl(t, dir, time.Minute, "recover", "--dry-run", "--scan", dev)
	if code != 0 || !strings.Contains(errOut, "--scan rebuilds only when no checkpoint is usable") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
