package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/nvme"
)

func runIdentifyCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// The emulated SSD answers through the same nvme encoders and decoders as a real controller.
func TestIdentifyEmulatedJSON(t *testing.T) {
	out, err := runIdentifyCLI(t, "identify", "emu:mem?size=256M", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"sn", "mn", "fr", "ctratt", "oncs", "nsze", "ncap", "nuse", "flbas", "lbafs", "lbads", "block_size"} {
		if _, ok := j[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	bs := int64(j["block_size"].(float64))
	if nsze := int64(j["nsze"].(float64)); nsze*bs != 256<<20 || int64(j["capacity_bytes"].(float64)) != 256<<20 {
		t.Errorf("nsze %d x %d != 256 MiB", nsze, bs)
	}
	if ctratt := uint32(j["ctratt"].(float64)); ctratt&nvme.CTRATTFDPS == 0 || j["fdp_supported"] != true {
		t.Errorf("emulated SSD without FDPS: ctratt %#x", ctratt)
	}
	if 1<<int(j["lbads"].(float64)) != int(bs) {
		t.Errorf("lbads %v vs block size %d", j["lbads"], bs)
	}

	out, err = runIdentifyCLI(t, "identify", "emu:mem?size=256M")
	if err != nil || !strings.Contains(out, "rbctl emulated FDP SSD") || !strings.Contains(out, "268435456 bytes") {
		t.Errorf("table output: %v\n%s", err, out)
	}
}

func TestNVMeLogCLI(t *testing.T) {
	out, err := runIdentifyCLI(t, "nvme", "log", "emu:mem?size=256M", "--lid", "0x22", "--lsi", "1", "--len", "64")
	if err != nil || !strings.Contains(out, "log 0x22") || strings.Count(out, "\n") != 5 {
		t.Errorf("stats log: %v\n%s", err, out)
	}
	_, err = runIdentifyCLI(t, "nvme", "log", "emu:mem?size=256M", "--lid", "0x20", "--lsi", "9", "--len", "64")
	if !errors.Is(err, nvme.ErrInvalidField) {
		t.Errorf("wrong endurance group: %v", err)
	}
	if _, err := runIdentifyCLI(t, "nvme", "log", "emu:mem?size=256M", "--len", "64"); err == nil || !strings.Contains(err.Error(), "--lid") {
		t.Errorf("missing --lid: %v", err)
	}
	if _, err := runIdentifyCLI(t, "nvme", "log", "emu:mem?size=256M", "--lid", "2", "--len", "6"); err == nil {
		t.Error("--len 6 accepted")
	}
}

func TestIdentifyBadDevice(t *testing.T) {
	_, err := runIdentifyCLI(t, "identify", "/dev/null")
	if !errors.Is(err, nvme.ErrNotNVMe) || !strings.Contains(err.Error(), "/dev/ngXnY") {
		t.Errorf("/dev/null: %v", err)
	}
	_, err = runIdentifyCLI(t, "identify", t.TempDir())
	if !errors.Is(err, nvme.ErrNotNVMe) {
		t.Errorf("directory: %v", err)
	}
}
