package cachereport

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// formatted formats a 4 MiB memory device and stores keys with salt "s".
func formatted(t *testing.T, keys ...string) *blockdev.Mem {
	t.Helper()
	mem := blockdev.NewMem(4<<20, 4096)
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 64<<10, 1<<20, false
	e, err := engine.Format(noClose{mem}, cfg)
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

// noClose keeps the memory device's bytes across engine opens.
type noClose struct{ *blockdev.Mem }

func (noClose) Close() error { return nil }

func TestInspectReportsTheIndex(t *testing.T) {
	mem := formatted(t, "m\x1b[31m", "plain")
	r, err := Inspect(noClose{mem}, "mem", InspectOptions{Keys: true, MaxKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 2 || len(r.Keys) != 1 || r.Keys[0].Slot != 0 || r.BytesBySalt["s"] != 2*64<<10 || len(r.Containers) != 2 {
		t.Errorf("inspection %+v", r)
	}
	js, _ := json.Marshal(r)
	for _, field := range []string{`"layout":{"device_size":4194304,`, `"checkpoint_choice":{"container":`, `"bytes_by_cache_salt":{"s":131072}`, `"crc32c":"`} {
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
	e, err := engine.Open(noClose{mem}, engineConfig(t, mem))
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
	if err := WriteKeys(&b, ks); err != nil || !strings.Contains(b.String(), " - ") {
		t.Errorf("no '-' for a key written without a directive: %v\n%s", err, b.String())
	}
}

func engineConfig(t *testing.T, mem *blockdev.Mem) engine.Config {
	t.Helper()
	d, err := engine.Detect(noClose{mem})
	if err != nil {
		t.Fatal(err)
	}
	return d.Config
}

func TestRecoverNothingToRepair(t *testing.T) {
	mem := formatted(t, "k")
	cfg := engineConfig(t, mem)
	cfg.VerifyOnLoad = true
	e, err := engine.Open(noClose{mem}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Recover(context.Background(), e, "mem", RecoverOptions{})
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

func TestEscapeAndBytes(t *testing.T) {
	for in, want := range map[string]string{"plain/key@1": "plain/key@1", "a\nb": `a\nb`, "\x1b[0m": `\x1b[0m`, "a\\b": `a\\b`, "\xff": `\xff`} {
		if got := reports.Escape(in); got != want {
			t.Errorf("reports.Escape(%q) = %q, want %q", in, got, want)
		}
	}
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 1 << 30: "1.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
