package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io/fs"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// formatted formats a 4 MiB memory device and stores keys with salt "s".
func formatted(t *testing.T, keys ...string) *blockdev.Mem {
	t.Helper()
	mem := blockdev.NewMem(4<<20, 4096)
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 64<<10, 1<<20, false
	e, err := engine.Format(keepOpenDev{mem}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		key := engine.ObjectKey(k, 0, []byte{byte(i + 1)}, "s")
		if res, err := e.PutMany([]engine.Key{key}, [][]byte{bytes.Repeat([]byte{byte(i)}, 100+i)}); err != nil || len(res.Stored) != 1 {
			t.Fatalf("put %s: %v %+v", k, err, res)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

func TestInspectReportsTheIndex(t *testing.T) {
	mem := formatted(t, "m\x1b[31m", "plain")
	r, err := Inspect(keepOpenDev{mem}, "mem", InspectOptions{Keys: true, MaxKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 2 || len(r.Keys) != 1 || r.Keys[0].Slot != 0 || r.BytesBySalt["s"] != 2*64<<10 || len(r.Containers) != 2 {
		t.Errorf("inspection %+v", r)
	}
	js, _ := json.Marshal(r)
	for _, field := range []string{`"layout":{"device_size_bytes":4194304,`, `"checkpoint_choice":{"container":`, `"bytes_by_cache_salt":{"s":131072}`, `"crc32c":"`} {
		if !bytes.Contains(js, []byte(field)) {
			t.Errorf("JSON lacks %s:\n%s", field, js)
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| checkpoint   | container 1, seq 2, compact", "| 0    | m%1B%5B31m@0x00000000@01@s |", "4.17% of 48 slots"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
}

func TestInspectUnformattedFails(t *testing.T) {
	if r, err := Inspect(blockdev.NewMem(4<<20, 4096), "blank", InspectOptions{}); err == nil || r != nil {
		t.Errorf("blank device: %v, %v", r, err)
	}
}

func TestKeysFilterAndOrder(t *testing.T) {
	mem := formatted(t, "b", "a")
	e, err := engine.Open(keepOpenDev{mem}, engineConfig(t, mem))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ks := Keys(e, "")
	if len(ks) != 2 || ks[0].Key > ks[1].Key || ks[0].Salt != "s" || ks[0].Handle >= 0 {
		t.Errorf("keys %+v", ks)
	}
	if got := Keys(e, "other"); got == nil || len(got) != 0 {
		t.Errorf("keys of another salt: %#v (want empty, not nil: ls --json prints [])", got)
	}
	var b bytes.Buffer
	if err := cachereport.WriteKeys(&b, ks); err != nil || !strings.Contains(b.String(), " - ") {
		t.Errorf("no '-' for a key written without a directive: %v\n%s", err, b.String())
	}
}

func engineConfig(t *testing.T, mem *blockdev.Mem) engine.Config {
	t.Helper()
	d, err := engine.Detect(keepOpenDev{mem})
	if err != nil {
		t.Fatal(err)
	}
	return d.Config
}

func TestRecoverNothingToRepair(t *testing.T) {
	mem := formatted(t, "k")
	cfg := engineConfig(t, mem)
	cfg.VerifyOnLoad = true
	e, err := engine.Open(keepOpenDev{mem}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Recover(context.Background(), e, "mem", RepairOptions{})
	if err != nil || r.Kept != 1 || len(r.Repairs) != 0 || r.Written || r.Dropped == nil {
		t.Fatalf("recover: %v %+v", err, r)
	}
	var b bytes.Buffer
	_ = r.WriteText(&b)
	if !strings.HasSuffix(b.String(), "nothing to repair\n") {
		t.Errorf("text:\n%s", b.String())
	}
}

func TestRefusalAndRepairs(t *testing.T) {
	cands := [2]engine.Candidate{{Container: 0, Usable: true, Entries: 3}, {Container: 1, Usable: true, Entries: 5}}
	doubt := engine.RecoveryReport{Kept: 3, Selection: engine.Selection{Container: 0, Doubt: true, Reason: "equal seqs", Candidates: cands}}
	if why := Refusal(doubt); !strings.Contains(why, "in doubt (equal seqs)") || !strings.Contains(why, "replaces container 1") {
		t.Errorf("doubt: %q", why)
	}
	if rp := Repairs(doubt); len(rp) != 1 || !strings.Contains(rp[0], "replace container 1 (rejected, in doubt)") {
		t.Errorf("doubt repairs: %q", rp)
	}
	allBad := engine.RecoveryReport{Loaded: 2, Dropped: []engine.DroppedEntry{{Key: "k\n", Slot: 4, Reason: "bad magic"}},
		Selection: engine.Selection{Container: 0, Seq: 9, Candidates: cands}}
	if why := Refusal(allBad); !strings.Contains(why, `all 2 entries of container 0 (seq 9) fail verification (first: k\n in slot 4: bad magic)`) {
		t.Errorf("all dropped: %q", why)
	}
	if why := Refusal(engine.RecoveryReport{Kept: 1, Selection: engine.Selection{Candidates: cands}}); why != "" {
		t.Errorf("a kept key refused: %q", why)
	}
}

func TestInspectionsJSONKeepsEachDeviceReport(t *testing.T) {
	mem := formatted(t, "k1", "k2")
	ins, err := Inspect(keepOpenDev{mem}, "mem-a", InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cachereport.NewInspections([]string{"mem-a", "gone"}, []*cachereport.Inspection{ins, nil}, []error{nil, fs.ErrNotExist})
	if !errors.Is(err, fs.ErrNotExist) || r.Total.Entries != 2 || r.Total.Failed != 1 || r.Total.FreeSlots != ins.SlotsFree+ins.Layout.MaxSlots-ins.NextSlot {
		t.Fatalf("%+v %v", r.Total, err)
	}
	js, _ := json.Marshal(r.Output(true))
	var back struct {
		Devices []struct {
			Device  string `json:"device"`
			Entries int64  `json:"entries"`
			Error   string `json:"error"`
			Layout  *cachereport.Layout
		} `json:"devices"`
		Total cachereport.InspectTotal `json:"total"`
	}
	if err := json.Unmarshal(js, &back); err != nil || len(back.Devices) != 2 || back.Devices[0].Device != "mem-a" || back.Devices[0].Entries != 2 ||
		back.Devices[0].Layout == nil || back.Devices[1].Error == "" || back.Devices[1].Layout != nil || back.Total != r.Total {
		t.Fatalf("JSON %s: %v", js, err)
	}
	// One device: its report as inspect has always printed it, nothing in JSON on failure.
	one, _ := cachereport.NewInspections([]string{"mem-a"}, []*cachereport.Inspection{ins}, []error{nil})
	if one.Output(true) != ins {
		t.Error("one device: JSON is not its Inspection")
	}
	failed, _ := cachereport.NewInspections([]string{"gone"}, []*cachereport.Inspection{nil}, []error{fs.ErrNotExist})
	if failed.Output(true) != nil || failed.Output(false) != nil {
		t.Error("one missing device: something to print")
	}
}

func TestLostText(t *testing.T) {
	for _, c := range []struct {
		sel  engine.Selection
		want string
	}{
		{engine.Selection{}, "nothing lost"},
		{engine.Selection{Fallback: true}, "the keys it held are unknown (it cannot be read)"},
		{engine.Selection{Fallback: true, LostKnown: true}, "it holds no key the chosen checkpoint lacks"},
		{engine.Selection{Fallback: true, LostKnown: true, Lost: 1, LostSample: []string{"k\x01"}}, `it holds 1 key the chosen checkpoint lacks (k\x01)`},
		{engine.Selection{Fallback: true, LostKnown: true, Lost: 3, LostSample: []string{"a", "b"}}, "it holds 3 keys the chosen checkpoint lacks (a, b, ...)"},
	} {
		if got := ChoiceOf(c.sel).LostText(); got != c.want {
			t.Errorf("LostText(%+v) = %q, want %q", c.sel, got, c.want)
		}
	}
}

// TestInspectShowsAContainerThatDoesNotDecodeAsInvalid: a container whose header and CRC
// are sound but whose payload does not decode is invalid in the container table, as the
// checkpoint choice says (third hostile battery: the table said "valid").
func TestInspectShowsAContainerThatDoesNotDecodeAsInvalid(t *testing.T) {
	mem := formatted(t, "a", "b")
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 64<<10, 1<<20
	infos, err := engine.ReadContainers(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	if infos[1].Seq > infos[0].Seq {
		i = 1
	}
	garbage := bytes.Repeat([]byte("not a checkpoint "), 20)
	img := mem.Bytes()
	off := infos[i].Offset
	copy(img[off+4096:], garbage)
	binary.LittleEndian.PutUint64(img[off+20:], uint64(len(garbage)))        // payload_len
	binary.LittleEndian.PutUint32(img[off+28:], crc32.ChecksumIEEE(garbage)) // its CRC: the header is sound
	r, err := Inspect(keepOpenDev{mem}, "mem", InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Containers[i]
	if c.Valid || c.Problem == "" || r.UsedFrom != 1-i {
		t.Fatalf("container %d: valid %v, problem %q; recovered from %d", i, c.Valid, c.Problem, r.UsedFrom)
	}
}
