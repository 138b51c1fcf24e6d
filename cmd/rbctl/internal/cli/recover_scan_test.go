package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Both checkpoint containers damaged (a bit flipped in each payload; then one torn as
// well): every command says so and points to recover --scan, which rebuilds the index from
// the slot headers (--dry-run first, writing nothing), after which get serves every key
// byte-exact and the cache opens from its fresh checkpoint pair.
func TestRecoverScanRebuildsFromSlotHeaders(t *testing.T) {
	for _, torn := range []bool{false, true} {
		dir := t.TempDir()
		img := filepath.Join(dir, "c.img")
		if _, err := runCLI(t, "format", "--create", "32M", "--slot-bytes", "128K", "--meta-bytes", "1M", img); err != nil {
			t.Fatal(err)
		}
		var payloads [][]byte
		for i := 0; i < 6; i++ {
			p := bytes.Repeat([]byte(fmt.Sprintf("payload %d;", i)), 500*(i+1))
			payloads = append(payloads, p)
			f := filepath.Join(dir, fmt.Sprint("p", i))
			if err := os.WriteFile(f, p, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := runCLI(t, "put", img, "--key", fmt.Sprintf("m@0x00000000@0%d", i), f); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		b[4096+100] ^= 0x10        // container 0's payload
		b[512<<10+4096+90] ^= 0x01 // container 1's payload
		if torn {
			clear(b[512<<10+4096+60 : 512<<10+8192]) // and cut short
		}
		if err := os.WriteFile(img, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"inspect", img}, {"get", img, "--key", "m@0x00000000@00", "-o", filepath.Join(dir, "x")}, {"recover", img}} {
			_, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "rbctl recover --scan") {
				t.Fatalf("torn=%v: rbctl %s: %v", torn, args[0], err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Ctrl-C: the scan stops, exit 130, nothing written
		if code := Execute(ctx, []string{"recover", "--scan", img}); code != exitInterrupted {
			t.Fatalf("torn=%v: interrupted scan: exit %d", torn, code)
		}
		if after, _ := os.ReadFile(img); !bytes.Equal(after, b) {
			t.Fatalf("torn=%v: the interrupted scan wrote", torn)
		}
		out, err := runCLI(t, "recover", "--scan", "--dry-run", "--json", img)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Written bool `json:"checkpoint_written"`
			Kept    int  `json:"kept"`
			Scan    struct {
				Rebuilt int    `json:"rebuilt"`
				Source  string `json:"layout_source"`
			} `json:"scan"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Written || rep.Kept != 6 || rep.Scan.Rebuilt != 6 || rep.Scan.Source == "" {
			t.Fatalf("torn=%v: dry run %+v (%v):\n%s", torn, rep, err, out)
		}
		if after, _ := os.ReadFile(img); !bytes.Equal(after, b) {
			t.Fatalf("torn=%v: the dry run wrote", torn)
		}
		if out, err = runCLI(t, "recover", "--scan", img); err != nil || !strings.Contains(out, "6 entries rebuilt") || !strings.Contains(out, "repaired checkpoint written") {
			t.Fatalf("torn=%v: recover --scan: %v\n%s", torn, err, out)
		}
		for i, p := range payloads {
			o := filepath.Join(dir, fmt.Sprint("out", i))
			if _, err := runCLI(t, "get", img, "--key", fmt.Sprintf("m@0x00000000@0%d", i), "-o", o); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(o); !bytes.Equal(got, p) {
				t.Fatalf("torn=%v: key %d: %d bytes, want %d", torn, i, len(got), len(p))
			}
		}
		if out, err = runCLI(t, "recover", img); err != nil || !strings.Contains(out, "nothing to repair") {
			t.Fatalf("torn=%v: recover after the rebuild: %v\n%s", torn, err, out)
		}
	}
}

// LMCache's slot headers carry no key, so a scan of a cache LMCache wrote rebuilds nothing;
// recover refuses to replace the damaged containers with an empty index.
func TestRecoverScanOfLMCacheSlotsRefuses(t *testing.T) {
	img := make([]byte, 16<<20)
	lmSlotWrite(img, 0, 42, []byte("payload"))
	lmContainer(img, 0, 1, lmState(1, lmEntry("m@0x00000000@2a", 0, 7)))
	lmContainer(img, lmCont1, 2, lmState(1, lmEntry("m@0x00000000@2a", 0, 7)))
	img[4096+50] ^= 1
	img[lmCont1+4096+50] ^= 1
	p := writeImage(t, img)
	_, err := runCLI(t, "recover", "--scan", p)
	if err == nil || !strings.Contains(err.Error(), "rebuilt no key (1 without a key record") {
		t.Fatalf("recover --scan of LMCache slots: %v", err)
	}
}

// Both container headers wiped: nothing on the device shows the layout, so --scan asks for
// --slot-bytes (and --force does not guess), then rebuilds with it.
func TestRecoverScanNeedsSlotBytesWhenTheHeadersAreGone(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "c.img")
	if _, err := runCLI(t, "format", "--create", "32M", "--slot-bytes", "128K", "--meta-bytes", "1M", img); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "p")
	os.WriteFile(p, bytes.Repeat([]byte("x"), 5000), 0o600)
	for i := 0; i < 3; i++ {
		if _, err := runCLI(t, "put", img, "--key", fmt.Sprintf("m@0x00000000@0%d", i), p); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(img)
	clear(b[:8192])
	clear(b[512<<10 : 512<<10+8192])
	os.WriteFile(img, b, 0o600)
	if _, err := runCLI(t, "inspect", img); err == nil || !strings.Contains(err.Error(), "a slot header sits at offset 1048576") {
		t.Fatalf("inspect: %v", err)
	}
	for _, args := range [][]string{{"recover", "--scan", img}, {"recover", "--force", img}} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "--slot-bytes") {
			t.Fatalf("%v: %v", args, err)
		}
	}
	if _, err := runCLI(t, "recover", "--scan", "--slot-bytes", "64K", img); err == nil || !strings.Contains(err.Error(), "slot_bytes is likely 131072") {
		t.Fatalf("half the slot size: %v", err)
	}
	out, err := runCLI(t, "recover", "--scan", "--slot-bytes", "128K", img)
	if err != nil || !strings.Contains(out, "3 entries rebuilt") {
		t.Fatalf("recover --scan --slot-bytes 128K: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "get", img, "--key", "m@0x00000000@02", "-o", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
}
