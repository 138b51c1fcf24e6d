package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports/cachereport"
)

// rbRun runs rbctl with args and returns stdout, the error and the bytes of dev afterwards.
func rbRun(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestEngineCommandsEndToEnd(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "cache.img")
	out, err := rbRun(t, "", "format", "--create", "64M", "--slot-bytes", "64K", "--json", dev)
	if err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	var lay cachereport.Layout
	if err := json.Unmarshal([]byte(out), &lay); err != nil || lay.MaxSlots == 0 || lay.SlotBytes != 64<<10 {
		t.Fatalf("format --json: %v %+v", err, lay)
	}
	if _, err := rbRun(t, "hello raw block", "put", dev, "--model", "org/m", "--rank", "1", "--hash", "abcd", "--salt", "t1", "-"); err != nil {
		t.Fatal(err)
	}
	out, err = rbRun(t, "", "get", dev, "--key", "org%2Fm@0x00000001@abcd@t1")
	if err != nil || out != "hello raw block" {
		t.Fatalf("get = %q %v", out, err)
	}
	if _, err := rbRun(t, "other", "put", dev, "--key", "org%2Fm@0x00000001@abcd@t1", "-"); err == nil || !strings.Contains(err.Error(), "already stored") {
		t.Fatalf("second put: %v", err)
	}
	out, err = rbRun(t, "", "inspect", "--json", "--keys", dev)
	if err != nil {
		t.Fatal(err)
	}
	var rep cachereport.Inspection
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Entries != 1 || len(rep.Keys) != 1 || rep.BytesBySalt["t1"] != 64<<10 || len(rep.Containers) != 2 {
		t.Fatalf("inspect: %v %+v", err, rep)
	}
	if out, err := rbRun(t, "", "ls", dev); err != nil || !strings.Contains(out, "org%2Fm@0x00000001@abcd@t1") {
		t.Fatalf("ls = %q %v", out, err)
	}
	if out, err := rbRun(t, "", "recover", "--dry-run", dev); err != nil || !strings.Contains(out, "kept 1, dropped 0") {
		t.Fatalf("recover = %q %v", out, err)
	}
	if _, err := rbRun(t, "", "rm", dev, "--key", "org%2Fm@0x00000001@abcd@t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rbRun(t, "", "get", dev, "--key", "org%2Fm@0x00000001@abcd@t1"); err == nil {
		t.Fatal("get after rm succeeded")
	}
}

func TestEngineCommandsRejectBadInputWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.img")
	os.WriteFile(small, make([]byte, 1<<20), 0o644)
	cached := filepath.Join(dir, "cached.img")
	if _, err := rbRun(t, "", "format", "--create", "16M", "--slot-bytes", "64K", cached); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(cached)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing device", []string{"format", filepath.Join(dir, "nope")}, "--create"},
		{"bad slot size", []string{"format", "--slot-bytes", "12345", small}, "slot_bytes"},
		{"unparseable size", []string{"format", "--slot-bytes", "lots", small}, "cannot parse size"},
		{"device too small", []string{"format", "--slot-bytes", "1M", "--meta-bytes", "1M", small}, "too small"},
		{"existing cache", []string{"format", cached}, "--force"},
		{"capacity above the device", []string{"format", "--capacity", "1T", small}, "capacity_bytes 1T is larger than " + small + " (1.0 MiB): give at most 1M, or 0 for the whole device"},
		{"capacity above a device to create", []string{"format", "--create", "16M", "--capacity", "17M", filepath.Join(dir, "new.img")}, "is larger than"},
		{"unknown compat", []string{"format", "--compat", "lmcache-v9", small}, "lmcache-v1"},
		{"inspect of an unformatted device", []string{"inspect", small}, "format"},
		{"put without a key", []string{"put", cached, "-"}, "no key"},
		{"get of a missing key", []string{"get", cached, "--key", "m@0x00000000@00"}, "not in the cache"},
		{"rm of a missing key", []string{"rm", cached, "--key", "m@0x00000000@00"}, "not in the cache"},
	} {
		_, err := rbRun(t, "x", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.img")); !os.IsNotExist(err) {
		t.Errorf("a refused format --create created its device: %v", err)
	}
	after, _ := os.ReadFile(cached)
	if !bytes.Equal(before, after) {
		t.Error("a rejected command changed the cache device")
	}
	if b, _ := os.ReadFile(small); !bytes.Equal(b, make([]byte, 1<<20)) {
		t.Error("a rejected format wrote to the small device")
	}
}

func TestFormatCompatLMCacheV1IsInspectable(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "lmc.img")
	if out, err := rbRun(t, "", "format", "--create", "32M", "--slot-bytes", "64K", "--meta-bytes", "2M", "--compat", "lmcache-v1", dev); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := rbRun(t, "payload", "put", dev, "--key", "m@0x00000000@00", "-"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dev)
	if !bytes.Contains(b[4096:1<<20], []byte(`{"version":1,"device_path":"`+dev+`"`)) {
		t.Fatal("no LMCache v1 JSON checkpoint in container 0 or 1")
	}
	out, err := rbRun(t, "", "inspect", "--json", dev)
	if err != nil {
		t.Fatal(err)
	}
	var rep cachereport.Inspection
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Layout.CheckpointFormat != "lmcache-v1" || rep.Entries != 1 || rep.Layout.MetaTotalBytes != 2<<20 {
		t.Fatalf("inspect: %v %+v", err, rep)
	}
}

// TestFormatDevicePathRecorded: LMCache ignores a v1 checkpoint whose device_path differs
// from its configured path, so format records DEV as an absolute path by default and
// --device-path overrides it.
func TestFormatDevicePathRecorded(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if out, err := rbRun(t, "", "format", "--create", "32M", "--slot-bytes", "64K", "--meta-bytes", "2M", "--compat", "lmcache-v1", "rel.img"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	abs := filepath.Join(dir, "rel.img")
	b, _ := os.ReadFile(abs)
	if !bytes.Contains(b[4096:1<<20], []byte(`{"version":1,"device_path":"`+abs+`"`)) {
		t.Fatalf("checkpoint does not record the absolute path %s", abs)
	}
	if out, err := rbRun(t, "", "format", "--force", "--slot-bytes", "64K", "--meta-bytes", "2M", "--compat", "lmcache-v1", "--device-path", "/dev/nvme0n1", "rel.img"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ = os.ReadFile(abs)
	if !bytes.Contains(b[4096:1<<20], []byte(`{"version":1,"device_path":"/dev/nvme0n1"`)) {
		t.Fatal("--device-path not recorded")
	}
}

// put --placement cache-salt keeps every salt on one handle from one command to the next
// (the assignment is seeded from the handles stored with the entries), puts checkpoints on
// the metadata handle, and is refused on a device without placement handles.
func TestPutPlacementStableAcrossCommands(t *testing.T) {
	dir := t.TempDir()
	dev := "emu:" + filepath.Join(dir, "e.img") + "?size=64M&ru=1M&ruhs=8"
	const pol = "metadata-class+cache-salt"
	if out, err := rbRun(t, "", "format", "--slot-bytes", "64K", "--placement", pol, dev); err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	salts := []string{"rag", "chat", "rag", "agent", "chat", "agent"}
	for i, s := range salts {
		if out, err := rbRun(t, "x", "put", dev, "--placement", pol, "--model", "m", "--hash", fmt.Sprintf("%02x", i), "--salt", s, "-"); err != nil {
			t.Fatalf("put %d: %v\n%s", i, err, out)
		}
	}
	out, err := rbRun(t, "", "ls", "--json", dev)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SchemaVersion int               `json:"schema_version"`
		Keys          []cachereport.Key `json:"keys"`
	}
	err = json.Unmarshal([]byte(out), &doc)
	keys := doc.Keys
	if err != nil || doc.SchemaVersion != 1 || len(keys) != len(salts) {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	handleOf := map[string]int32{}
	used := map[int32]string{}
	for _, k := range keys {
		if h, ok := handleOf[k.Salt]; ok && h != k.Handle {
			t.Fatalf("salt %s on handles %d and %d across commands", k.Salt, h, k.Handle)
		}
		if s, ok := used[k.Handle]; ok && s != k.Salt {
			t.Fatalf("handle %d holds %s and %s", k.Handle, s, k.Salt)
		}
		if k.Handle < 0 || k.Handle >= 7 {
			t.Fatalf("%s on handle %d, want a data handle 0..6", k.Key, k.Handle)
		}
		handleOf[k.Salt], used[k.Handle] = k.Handle, k.Salt
	}
	if _, err := rbRun(t, "", "rm", dev, "--placement", pol, "--key", keys[0].Key); err != nil {
		t.Fatal(err)
	}
	if out, err := rbRun(t, "", "recover", dev, "--placement", pol); err != nil || !strings.Contains(out, "kept 5") {
		t.Fatalf("recover --placement: %v\n%s", err, out)
	}
	plain := filepath.Join(dir, "plain.img")
	if _, err := rbRun(t, "", "format", "--create", "16M", "--slot-bytes", "64K", plain); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(plain)
	if _, err := rbRun(t, "x", "put", plain, "--placement", "cache-salt", "--model", "m", "--hash", "01", "-"); err == nil || !strings.Contains(err.Error(), "no FDP") {
		t.Fatalf("put --placement on a plain file: %v", err)
	}
	if _, err := rbRun(t, "x", "put", plain, "--placement", "bogus", "--model", "m", "--hash", "01", "-"); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Fatalf("put --placement bogus: %v", err)
	}
	if after, _ := os.ReadFile(plain); !bytes.Equal(before, after) {
		t.Fatal("a refused put changed the image")
	}
	fresh := filepath.Join(dir, "fresh.img")
	if _, err := rbRun(t, "", "format", "--create", "16M", "--placement", "cache-salt", fresh); err == nil || !strings.Contains(err.Error(), "no placement handles") {
		t.Fatalf("format --create --placement: %v", err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a refused format created %s (%v)", fresh, err)
	}
}
