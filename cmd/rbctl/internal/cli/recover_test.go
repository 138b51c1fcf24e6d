package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports/cachereport"
)

// Images as LMCache leaves them: 16 MiB, 4 KiB align, 1 MiB metadata (containers at 0 and
// 512 KiB), 64 KiB slots with 4 KiB headers. No seal in the container headers.
const (
	lmMeta  = 1 << 20
	lmSlot  = 64 << 10
	lmCont1 = lmMeta / 2
)

func lmState(nextSlot int, entries string) string {
	return `{"version":1,"device_path":"","capacity_bytes":16777216,"block_align":4096,"header_bytes":4096,"slot_bytes":65536,"meta_total_bytes":1048576,"meta_magic":"LMCIDX01","meta_version":1,"data_base_offset":1048576,"next_slot":` +
		itoaCLI(nextSlot) + `,"entries":{` + entries + `}}`
}

func itoaCLI(n int) string { b, _ := json.Marshal(n); return string(b) }

func lmEntry(key string, slot, size int) string {
	k, _ := json.Marshal(key)
	return string(k) + `:{"offset":` + itoaCLI(lmMeta+slot*lmSlot) + `,"size":` + itoaCLI(size) + `,"shape":null,"dtype":null,"fmt":null,"cached_positions":null}`
}

func lmContainer(img []byte, off int64, seq uint64, js string) {
	clear(img[off : off+lmMeta/2])
	copy(img[off:], "LMCIDX01")
	binary.LittleEndian.PutUint32(img[off+8:], 1)
	binary.LittleEndian.PutUint64(img[off+12:], seq)
	binary.LittleEndian.PutUint64(img[off+20:], uint64(len(js)))
	binary.LittleEndian.PutUint32(img[off+28:], crc32.ChecksumIEEE([]byte(js)))
	copy(img[off+4096:], js)
}

func lmSlotWrite(img []byte, slot int, id uint64, payload []byte) {
	off := lmMeta + slot*lmSlot
	clear(img[off : off+4096])
	copy(img[off:], "LMCBLK01")
	binary.LittleEndian.PutUint64(img[off+8:], id)
	binary.LittleEndian.PutUint64(img[off+16:], uint64(len(payload)))
	copy(img[off+4096:], payload)
}

func writeImage(t *testing.T, img []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lm.img")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readImage(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// LMCache legacy keys (CacheEngineKey.to_string()) and their identities (the chunk hash).
var cliLegacy = []struct {
	key string
	id  uint64
}{{"m@1@0@7@float", 0x7}, {"m/x@2@1@abc@half@3", 0xabc}}

// The brief's case: an LMCache legacy history whose older container is empty and whose
// newer one holds the keys. recover keeps it whole (it used to read container 0, take the
// object namespace, fail every key and write an empty index).
func TestRecoverKeepsLMCacheLegacyHistory(t *testing.T) {
	img := make([]byte, 16<<20)
	lmContainer(img, 0, 1, lmState(0, ""))
	lmContainer(img, lmCont1, 2, lmState(2, lmEntry(cliLegacy[0].key, 0, 5)+","+lmEntry(cliLegacy[1].key, 1, 6)))
	lmSlotWrite(img, 0, cliLegacy[0].id, []byte("hello"))
	lmSlotWrite(img, 1, cliLegacy[1].id, []byte("world!"))
	dev := writeImage(t, img)
	out, err := rbRun(t, "", "inspect", "--json", dev)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	var ins cachereport.Inspection
	if err := json.Unmarshal([]byte(out), &ins); err != nil {
		t.Fatal(err)
	}
	if ins.Layout.Namespace != "legacy" || ins.Choice.Container != 1 || ins.Choice.NamespaceSource != "slot headers" || ins.Entries != 2 ||
		len(ins.Choice.Candidates) != 2 || *ins.Choice.Candidates[0].Entries != 0 || *ins.Choice.Candidates[1].Entries != 2 {
		t.Fatalf("inspect: %s", out)
	}
	out, err = rbRun(t, "", "recover", "--verify", dev)
	if err != nil || !strings.Contains(out, "kept 2, dropped 0") || !strings.Contains(out, "namespace legacy (from slot headers)") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	if out, err := rbRun(t, "", "get", dev, "--key", cliLegacy[1].key); err != nil || out != "world!" {
		t.Fatalf("get after recover: %q %v", out, err)
	}
}

func formatted(t *testing.T, compat string, keys ...string) string {
	t.Helper()
	dev := filepath.Join(t.TempDir(), "c.img")
	args := []string{"format", "--create", "16M", "--slot-bytes", "64K", "--meta-bytes", "1M", dev}
	if compat != "" {
		args = append(args, "--compat", compat)
	}
	if out, err := rbRun(t, "", args...); err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	for _, k := range keys { // each put closes with a checkpoint: seq 2 (container 1), 3 (container 0), ...
		if out, err := rbRun(t, "payload of "+k, "put", dev, "--key", k, "-"); err != nil {
			t.Fatalf("put %s: %v\n%s", k, err, out)
		}
	}
	return dev
}

func recoverJSON(t *testing.T, args ...string) (cachereport.Recovery, error) {
	t.Helper()
	out, err := rbRun(t, "", append([]string{"recover", "--json"}, args...)...)
	var rep cachereport.Recovery
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("recover --json: %v\n%s (%v)", jerr, out, err)
	}
	return rep, err
}

// Issue 15, first bullet, through the CLI: a flipped high bit in the older container's seq
// (container 1, seq 2) neither hides the newest key nor leaves recover with "nothing to
// repair": it replaces the damaged container.
func TestRecoverFlippedSeqBit(t *testing.T) {
	for _, compat := range []string{"", "lmcache-v1"} {
		dev := formatted(t, compat, "m@0x00000000@01", "m@0x00000000@02")
		img := readImage(t, dev)
		img[lmCont1+12+7] ^= 0x40 // bit 62 of seq 2
		os.WriteFile(dev, img, 0o600)
		if out, err := rbRun(t, "", "get", dev, "--key", "m@0x00000000@02"); err != nil || out != "payload of m@0x00000000@02" {
			t.Fatalf("%s: newest key after the flip: %q %v", compat, out, err)
		}
		rep, err := recoverJSON(t, dev)
		if err != nil || rep.Choice.Container != 0 || rep.Choice.Seq != 3 || rep.Choice.Fallback || !rep.Written || len(rep.Repairs) != 1 ||
			!strings.Contains(rep.Repairs[0], "replace container 1") || !strings.Contains(rep.Choice.Candidates[1].SeqNote, "damaged") {
			t.Fatalf("%s: recover: %+v %v", compat, rep, err)
		}
		rep, err = recoverJSON(t, dev)
		if err != nil || rep.Written || len(rep.Repairs) != 0 || rep.Kept != 2 {
			t.Fatalf("%s: second recover: %+v %v", compat, rep, err)
		}
	}
}

// Issue 15, third bullet: falling back from a corrupt newest container says what was lost;
// put refuses to write over it, recover accepts and says so.
func TestRecoverReportsFallbackLoss(t *testing.T) {
	dev := formatted(t, "", "m@0x00000000@01", "m@0x00000000@02") // container 0 (seq 3) holds @02, container 1 does not
	img := readImage(t, dev)
	img[28] ^= 0x01 // container 0's CRC field: invalid, payload still readable
	os.WriteFile(dev, img, 0o600)
	before := readImage(t, dev)
	out, err := rbRun(t, "x", "put", dev, "--key", "m@0x00000000@03", "-")
	if err == nil || !strings.Contains(err.Error(), "rbctl recover") || !strings.Contains(err.Error(), "1 key the chosen checkpoint lacks (m@0x00000000@02)") {
		t.Fatalf("put over a lossy fallback: %v\n%s", err, out)
	}
	if !bytes.Equal(before, readImage(t, dev)) {
		t.Fatal("the refused put wrote to the device")
	}
	rep, err := recoverJSON(t, "--dry-run", dev)
	if err != nil || !rep.Choice.Fallback || rep.Choice.LostKeys == nil || *rep.Choice.LostKeys != 1 || rep.Choice.LostSample[0] != "m@0x00000000@02" || rep.Written {
		t.Fatalf("recover --dry-run: %+v %v", rep, err)
	}
	out, err = rbRun(t, "", "recover", dev)
	if err != nil || !strings.Contains(out, "fallback: keys lost: 1 (m@0x00000000@02)") || !strings.Contains(out, "repaired checkpoint written") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	if _, err := rbRun(t, "x", "put", dev, "--key", "m@0x00000000@03", "-"); err != nil {
		t.Fatalf("put after recover: %v", err)
	}
	// A destroyed header: what it held is unknown, and the report says so.
	dev = formatted(t, "", "m@0x00000000@01", "m@0x00000000@02")
	img = readImage(t, dev)
	copy(img, "XXXXXXXX")
	os.WriteFile(dev, img, 0o600)
	out, err = rbRun(t, "", "recover", "--dry-run", dev)
	if err != nil || !strings.Contains(out, "fallback: keys lost: unknown") {
		t.Fatalf("recover, destroyed header: %v\n%s", err, out)
	}
	rep, _ = recoverJSON(t, "--dry-run", dev)
	if rep.Choice.LostKeys != nil || rep.Choice.LostKnown {
		t.Fatalf("unknown loss in JSON: %+v", rep.Choice)
	}
}

// --key-namespace: an empty LMCache v1 checkpoint records no namespace; writers refuse without
// it, and it must agree with what the device shows once keys tell.
func TestNamespaceFlag(t *testing.T) {
	img := make([]byte, 16<<20)
	lmContainer(img, 0, 1, lmState(0, ""))
	dev := writeImage(t, img)
	before := readImage(t, dev)
	for _, cmd := range []string{"put", "rm"} {
		args := []string{cmd, dev, "--key", cliLegacy[0].key}
		if cmd == "put" {
			args = append(args, "-")
		}
		if _, err := rbRun(t, "hello", args...); err == nil || !strings.Contains(err.Error(), "--key-namespace") {
			t.Fatalf("%s without --key-namespace: %v", cmd, err)
		}
	}
	if !bytes.Equal(before, readImage(t, dev)) {
		t.Fatal("a refused writer wrote to the device")
	}
	if out, err := rbRun(t, "", "ls", dev); err != nil { // readers need no namespace
		t.Fatalf("ls: %v\n%s", err, out)
	}
	if out, err := rbRun(t, "hello", "put", dev, "--key-namespace", "legacy", "--key", cliLegacy[0].key, "-"); err != nil {
		t.Fatalf("put --key-namespace legacy: %v\n%s", err, out)
	}
	if id := binary.LittleEndian.Uint64(readImage(t, dev)[lmMeta+8:]); id != cliLegacy[0].id {
		t.Fatalf("slot identity %x, want the chunk hash %x", id, cliLegacy[0].id)
	}
	if _, err := rbRun(t, "x", "put", dev, "--key-namespace", "object", "--key", "m@0x00000000@01", "-"); err == nil || !strings.Contains(err.Error(), "uses the legacy namespace") {
		t.Fatalf("contradicting --key-namespace: %v", err)
	}
	if _, err := rbRun(t, "x", "put", dev, "--key-namespace", "bogus", "--key", "k", "-"); err == nil || !strings.Contains(err.Error(), "object or legacy") {
		t.Fatalf("bad --key-namespace: %v", err)
	}
	if out, err := rbRun(t, "", "rm", dev, "--key-namespace", "legacy", "--key", cliLegacy[0].key); err != nil {
		t.Fatalf("rm --key-namespace legacy: %v\n%s", err, out)
	}
}

// recover never writes an index that drops every key without --force.
func TestRecoverRefusesEmptyIndexWithoutForce(t *testing.T) {
	dev := formatted(t, "", "m@0x00000000@01", "m@0x00000000@02")
	img := readImage(t, dev)
	for s := 0; s < 2; s++ {
		img[lmMeta+s*lmSlot+8] ^= 0xff // every slot header's identity: both entries stale
	}
	os.WriteFile(dev, img, 0o600)
	before := readImage(t, dev)
	rep, err := recoverJSON(t, dev)
	if err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(rep.Refused, "all 2 entries") || rep.Written {
		t.Fatalf("recover: %+v %v", rep, err)
	}
	if !bytes.Equal(before, readImage(t, dev)) {
		t.Fatal("the refused recover wrote to the device")
	}
	out, err := rbRun(t, "", "recover", "--force", dev)
	if err != nil || !strings.Contains(out, "repaired checkpoint written") {
		t.Fatalf("recover --force: %v\n%s", err, out)
	}
	if rep, _ := recoverJSON(t, dev); rep.Loaded != 0 || rep.Written {
		t.Fatalf("after --force: %+v", rep)
	}
}

// A compact checkpoint next to one another program wrote (LMCache v1 JSON, no seal): in
// doubt; put refuses, recover reports and writes only with --force, inspect shows both.
func TestMixedFormatsNeedForce(t *testing.T) {
	dev := formatted(t, "", "m@0x00000000@01", "m@0x00000000@02") // compact, container 0 seq 3
	img := readImage(t, dev)
	lmContainer(img, lmCont1, 4, lmState(0, "")) // LMCache could not read it, started empty
	os.WriteFile(dev, img, 0o600)
	out, err := rbRun(t, "", "inspect", dev)
	if err != nil || !strings.Contains(out, "compact") || !strings.Contains(out, "lmcache-v1") || !strings.Contains(out, "different formats") || !strings.Contains(out, "in doubt") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if _, err := rbRun(t, "x", "put", dev, "--key", "m@0x00000000@03", "-"); err == nil || !strings.Contains(err.Error(), "in doubt") {
		t.Fatalf("put in doubt: %v", err)
	}
	rep, err := recoverJSON(t, dev)
	if err == nil || !rep.Choice.Doubt || !rep.Choice.MixedFormats || rep.Written {
		t.Fatalf("recover in doubt: %+v %v", rep, err)
	}
	if rep, err := recoverJSON(t, "--force", dev); err != nil || !rep.Written {
		t.Fatalf("recover --force: %+v %v", rep, err)
	}
	if _, err := rbRun(t, "x", "put", dev, "--key", "m@0x00000000@03", "-"); err != nil {
		t.Fatalf("put after recover --force: %v", err)
	}
}

// Ctrl-C during recover --verify: exit 130, nothing written.
func TestRecoverInterrupted(t *testing.T) {
	dev := formatted(t, "", "m@0x00000000@01", "m@0x00000000@02")
	img := readImage(t, dev)
	img[lmMeta+8] ^= 0xff // a stale entry: recover would write
	os.WriteFile(dev, img, 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := Execute(ctx, []string{"recover", "--verify", dev}); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d", code, exitInterrupted)
	}
	if !bytes.Equal(img, readImage(t, dev)) {
		t.Fatal("an interrupted recover wrote to the device")
	}
}

// recover counts every free slot: the free lists and the slots never used yet (a fresh cache
// has all of its slots free, not "0 free slots").
func TestRecoverCountsNeverUsedSlotsAsFree(t *testing.T) {
	img := filepath.Join(t.TempDir(), "c.img")
	if _, err := runCLI(t, "format", "--create", "16M", "--slot-bytes", "64K", img); err != nil {
		t.Fatal(err)
	}
	if _, err := rbRun(t, "hello", "put", img, "--model", "m", "--hash", "01", "-"); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "recover", "--json", img)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Kept      int   `json:"kept"`
		Free      int64 `json:"free_slots"`
		NeverUsed int64 `json:"never_used_slots"`
		Total     int64 `json:"total_free_slots"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	inspect, err := runCLI(t, "inspect", "--json", img)
	if err != nil {
		t.Fatal(err)
	}
	var lay struct {
		Layout struct {
			MaxSlots int64 `json:"max_slots"`
		} `json:"layout"`
	}
	if err := json.Unmarshal([]byte(inspect), &lay); err != nil || lay.Layout.MaxSlots == 0 {
		t.Fatalf("inspect --json: %v\n%s", err, inspect)
	}
	if rep.Kept != 1 || rep.Total != lay.Layout.MaxSlots-1 || rep.Total != rep.Free+rep.NeverUsed {
		t.Errorf("kept %d, free %d + never used %d = %d; want %d free of %d slots", rep.Kept, rep.Free, rep.NeverUsed, rep.Total, lay.Layout.MaxSlots-1, lay.Layout.MaxSlots)
	}
}

// A container whose checkpoint cannot be read has no entry count, next slot or stale count
// in the JSON of inspect and recover: absent, not -1 or 0 (docs/cli.md "JSON").
func TestUnknownCountsAreLeftOut(t *testing.T) {
	dev := formatted(t, "") // one checkpoint (seq 1, container 0); container 1 never written
	for _, cmd := range [][]string{{"inspect", "--json", dev}, {"recover", "--json", "--dry-run", dev}} {
		out, err := rbRun(t, "", cmd...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd[0], err, out)
		}
		var doc struct {
			Choice struct {
				Candidates []map[string]any `json:"candidates"`
			} `json:"checkpoint_choice"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Choice.Candidates) != 2 {
			t.Fatalf("%s: %v\n%s", cmd[0], err, out)
		}
		read, empty := doc.Choice.Candidates[0], doc.Choice.Candidates[1]
		if read["entries"] != 0.0 || read["next_slot"] != 0.0 {
			t.Errorf("%s: the written container's counts: %v", cmd[0], read)
		}
		for _, f := range []string{"entries", "next_slot", "stale_entries"} {
			if v, ok := empty[f]; ok {
				t.Errorf("%s: the empty container has %s %v", cmd[0], f, v)
			}
		}
		if strings.Contains(out, "-1") {
			t.Errorf("%s: a -1 in the JSON:\n%s", cmd[0], out)
		}
	}
}
