package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/reports/cachereport"
)

// One cache over three file images: format, inspect and recover each print a row per
// device and the total, text and JSON.
func TestShardedFormatInspectRecover(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")
	out, err := rbRun(t, "", "format", "--create", "16M", "--slot-bytes", "64K", "--json", a, b, c)
	if err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	var fr cachereport.Formats
	if err := json.Unmarshal([]byte(out), &fr); err != nil || len(fr.Devices) != 3 || fr.Total.Formatted != 3 || fr.Devices[2].Rank != 2 ||
		fr.Devices[1].Device != b || fr.Total.Slots != 3*fr.Devices[0].Layout.MaxSlots {
		t.Fatalf("format --json: %v %+v\n%s", err, fr, out)
	}
	for i, p := range []string{a, a, b} {
		if _, err := rbRun(t, "payload", "put", p, "--model", "m", "--hash", "0"+string(rune('1'+i)), "-"); err != nil {
			t.Fatal(err)
		}
	}
	out, err = rbRun(t, "", "inspect", a, b, c)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	slots := fr.Devices[0].Layout.MaxSlots
	total := tableRow(t, out, "total")
	if want := []string{"total", "3", "192.0 KiB", itoaCLI(int(3*slots - 3)), itoaCLI(int(3 * slots)), "3 of 3 ok"}; strings.Join(total, "|") != strings.Join(want, "|") {
		t.Errorf("inspect total row %q, want %q\n%s", total, want, out)
	}
	if row := tableRow(t, out, a); len(row) < 2 || row[1] != "2" {
		t.Errorf("inspect row of %s: %q", a, row)
	}
	out, err = rbRun(t, "", "inspect", "--json", a, b, c)
	var ins struct {
		Devices []struct {
			Device  string `json:"device"`
			Entries int64  `json:"entries"`
		} `json:"devices"`
		Total cachereport.InspectTotal `json:"total"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ins) != nil || len(ins.Devices) != 3 || ins.Devices[1].Entries != 1 || ins.Total.Entries != 3 {
		t.Fatalf("inspect --json: %v %+v\n%s", err, ins, out)
	}
	out, err = rbRun(t, "", "recover", a, b, c)
	if err != nil || !strings.Contains(out, a+": checkpoint container") || !strings.Contains(out, c+": checkpoint container") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	if row := tableRow(t, out, "total"); len(row) != 6 || row[1] != "3" || row[2] != "3" || row[5] != "3 of 3 ok, 0 written" {
		t.Errorf("recover total row %q\n%s", row, out)
	}
	out, err = rbRun(t, "", "recover", "--dry-run", "--json", a, c)
	var rec cachereport.Recoveries
	if err != nil || json.Unmarshal([]byte(out), &rec) != nil || len(rec.Devices) != 2 || rec.Total.Kept != 2 || !rec.Devices[1].DryRun {
		t.Fatalf("recover --json: %v %+v\n%s", err, rec, out)
	}
}

// tableRow is the cells of the table row of out whose first cell is first.
func tableRow(t *testing.T, out, first string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		cells := strings.Split(strings.Trim(l, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) > 1 && cells[0] == first {
			return cells
		}
	}
	t.Errorf("no row %q in:\n%s", first, out)
	return nil
}

// All or nothing: one device the gate refuses, or the same device twice, and no device is
// formatted or created.
func TestShardedFormatRefusals(t *testing.T) {
	dir := t.TempDir()
	a, b, fsImg := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "fs.img")
	ext4Image(t, fsImg, 32<<20)
	if err := os.WriteFile(a, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "rbctl: nothing was formatted: 1 of 3 devices failed: refusing to format "+fsImg+`: it holds an ext4 filesystem (label "data"); pass --force to destroy it`,
		"format", "--create", "16M", "--slot-bytes", "64K", a, b, fsImg)
	refused(t, dir, a+" is given twice: the same device is given twice", "format", "--slot-bytes", "64K", a, a)
	if err := os.Symlink(a, filepath.Join(dir, "link.img")); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "are the same device (inode ", "format", "--slot-bytes", "64K", a, "link.img")
	refused(t, dir, "are the same device", "format", "--slot-bytes", "64K", a, "emu:"+a+"?size=16M")
}

// inspect of two devices, one missing: exit 3, the other device still printed.
func TestShardedInspectMissingDevice(t *testing.T) {
	dir := t.TempDir()
	a, gone, junk := filepath.Join(dir, "a.img"), filepath.Join(dir, "gone.img"), filepath.Join(dir, "junk.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", a)
	code, so, se := runRbctl(t, dir, time.Minute, "inspect", a, gone)
	if code != exitNotFound || !strings.Contains(so, "| "+a) || !strings.Contains(so, gone+": error: ") ||
		!strings.Contains(se, "rbctl: 1 of 2 devices failed: ") || !strings.Contains(so, "1 of 2 ok") {
		t.Fatalf("exit %d\n%s\nstderr: %s", code, so, se)
	}
	code, so, _ = runRbctl(t, dir, time.Minute, "inspect", "--json", gone, a)
	var ins struct {
		Devices []struct {
			Error  string           `json:"error"`
			Layout *json.RawMessage `json:"layout"`
		} `json:"devices"`
	}
	if code != exitNotFound || json.Unmarshal([]byte(so), &ins) != nil || len(ins.Devices) != 2 || ins.Devices[0].Error == "" || ins.Devices[1].Layout == nil {
		t.Fatalf("--json: exit %d\n%s", code, so)
	}
	// A device that is not a cache is an error (exit 1), not "not found".
	if err := os.WriteFile(junk, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, so, se := runRbctl(t, dir, time.Minute, "inspect", a, junk, gone); code != exitError || !strings.Contains(so, "| total ") {
		t.Fatalf("junk: exit %d\n%s\nstderr: %s", code, so, se)
	}
	// recover exits non-zero when one device fails, after recovering the other.
	if code, so, se := runRbctl(t, dir, time.Minute, "recover", a, junk); code != exitError || !strings.Contains(so, "1 of 2 ok") {
		t.Fatalf("recover with a junk device: exit %d\n%s\nstderr: %s", code, so, se)
	}
}

// Ctrl-C before the writes: exit 130 and no device formatted (nor created).
func TestShardedFormatInterrupted(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := Execute(ctx, []string{"format", "--create", "16M", "--slot-bytes", "64K", a, b}); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; an interrupted format created it", p, err)
		}
	}
}
