package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Issue 29's keys through put / get / ls / rm on an image: every LMCache shape is stored
// byte for byte, read back, listed with the salt its fields name, and removed.
func TestPutGetLsEveryKeyShape(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if _, err := runCLI(t, "format", "--create", "16M", "--slot-bytes", "64K", "--meta-bytes", "1M", img); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{ // key → the cache_salt ls must show
		"m@0x00000000@1@00ff":                     "",
		"m@0x00000000@10@00ff":                    "",
		"my%2Fmodel@0x00000001@0@deadbeef@tenant": "tenant",
		"m@0x100030803@0@00ff@rag:a":              "rag:a",
		"m@0x100030803@00ff":                      "",
		"my/model@00000001@0@deadbeef@tenant":     "tenant",
	}
	for k := range keys {
		p := filepath.Join(dir, "p")
		payload := []byte("payload of " + k)
		if err := os.WriteFile(p, payload, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := runCLI(t, "put", img, "--key", k, p); err != nil {
			t.Fatalf("put --key %s: %v", k, err)
		}
		out, err := runCLI(t, "get", img, "--key", k)
		if err != nil || out != string(payload) {
			t.Fatalf("get --key %s: %q %v", k, out, err)
		}
	}
	// The native spelling names the raw-block key of the same ObjectKey.
	out, err := runCLI(t, "get", img, "--native-key", "my/model@00000001@0@deadbeef@tenant")
	if err != nil || out != "payload of my%2Fmodel@0x00000001@0@deadbeef@tenant" {
		t.Fatalf("get --native-key: %q %v", out, err)
	}
	out, err = runCLI(t, "ls", img, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema string `json:"schema"`
		Keys   []struct {
			Key  string `json:"key"`
			Salt string `json:"cache_salt"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Schema != "rbctl.ls" {
		t.Fatalf("%v\n%s", err, out)
	}
	listed := doc.Keys
	if len(listed) != len(keys) {
		t.Fatalf("ls lists %d keys, want %d:\n%s", len(listed), len(keys), out)
	}
	for _, l := range listed {
		if want, ok := keys[l.Key]; !ok || l.Salt != want {
			t.Errorf("ls: %q salt %q, want %q", l.Key, l.Salt, want)
		}
	}
	if _, err := runCLI(t, "rm", img, "--key", "m@0x100030803@0@00ff@rag:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "get", img, "--key", "m@0x100030803@0@00ff@rag:a"); err == nil {
		t.Fatal("get after rm found the key")
	}
}
