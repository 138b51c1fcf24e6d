package torture

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// TestMain turns the test binary into a writer process when the harness re-executes it.
func TestMain(m *testing.M) {
	if ok, err := RunWriterFromEnv(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "torture writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPayloadDeterministic(t *testing.T) {
	max := DefaultGeometry().MaxPayload()
	a, b := Payload(7, 3, max), Payload(7, 3, max)
	if string(a) != string(b) || len(a) < 16 || len(a) > max {
		t.Fatalf("payload not deterministic or out of bounds: %d bytes", len(a))
	}
	if c := Payload(7, 4, max); string(c[:16]) == string(a[:16]) {
		t.Fatal("two versions share a payload prefix")
	}
	for idx := uint64(0); idx < 50; idx++ {
		if got, ok := IndexOf(KeyFor(idx)); !ok || got != idx {
			t.Fatalf("IndexOf(KeyFor(%d)) = %d, %v", idx, got, ok)
		}
	}
	if _, ok := IndexOf(engine.RawKey("other@0x00000000@00")); ok {
		t.Fatal("a foreign key parsed as a torture key")
	}
}

func TestParseRecords(t *testing.T) {
	good := []string{"R 3 7 1", "I P 4 9", "A P 4 9 ok", "A D 4 9 fail", "S 2", "C 2 11", "E 3", "X 1 2", "U 1 2", "F"}
	for _, s := range good {
		if _, err := parseRecord(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "Q 1", "A P 4 9 maybe", "I Z 1 2", "C 1", "R x 1 1"} {
		if _, err := parseRecord(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func recs(t *testing.T, lines ...string) []Record {
	t.Helper()
	var out []Record
	for _, l := range lines {
		r, err := parseRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestExpect(t *testing.T) {
	tests := []struct {
		name     string
		baseline map[uint64]uint64
		log      []string
		want     map[uint64][]uint64 // idx → allowed versions (0 = absent), settled first
	}{
		{"put-before-checkpoint-must-survive", nil,
			[]string{"R 0 1 1", "I P 1 5", "A P 1 5 ok", "S 1", "C 1 2"}, map[uint64][]uint64{1: {5}}},
		{"put-after-checkpoint-may-be-lost", nil,
			[]string{"S 1", "C 1 2", "I P 1 5", "A P 1 5 ok"}, map[uint64][]uint64{1: {0, 5}}},
		{"acked-during-checkpoint-is-ambiguous", nil,
			[]string{"I P 1 5", "S 1", "A P 1 5 ok", "C 1 2"}, map[uint64][]uint64{1: {0, 5}}},
		{"failed-put-never-counts", nil,
			[]string{"I P 1 5", "A P 1 5 fail", "S 1", "C 1 2", "I P 1 6"}, map[uint64][]uint64{1: {0, 6}}},
		{"delete-before-checkpoint-must-stay-deleted", map[uint64]uint64{2: 3},
			[]string{"I D 2 3", "A D 2 3 ok", "S 1", "C 1 2"}, map[uint64][]uint64{2: {0}}},
		{"refused-delete-keeps-key", map[uint64]uint64{2: 3},
			[]string{"I D 2 3", "A D 2 3 fail", "S 1", "C 1 2"}, map[uint64][]uint64{2: {3}}},
		{"in-flight-delete-then-put", map[uint64]uint64{2: 3},
			[]string{"S 1", "C 1 2", "I D 2 3", "A D 2 3 ok", "I P 2 8"}, map[uint64][]uint64{2: {3, 0, 8}}},
		{"no-checkpoint-baseline-settles", map[uint64]uint64{2: 3},
			[]string{"I D 2 3", "A D 2 3 ok"}, map[uint64][]uint64{2: {3, 0}}},
		{"incomplete-checkpoint-does-not-count", nil,
			[]string{"I P 1 5", "A P 1 5 ok", "S 1"}, map[uint64][]uint64{1: {0, 5}}},
		{"clean-close-settles-everything", nil,
			[]string{"S 1", "C 1 1", "I P 1 5", "A P 1 5 ok", "F"}, map[uint64][]uint64{1: {5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := Expect(tc.baseline, recs(t, tc.log...))
			for idx, want := range tc.want {
				got := ex.Allowed[idx]
				if len(got) != len(want) {
					t.Fatalf("key %d: allowed %v, want %v", idx, got, want)
				}
				for i := range want {
					if got[i].Ver != want[i] {
						t.Fatalf("key %d: allowed %v, want %v", idx, got, want)
					}
				}
			}
		})
	}
}

// TestVerifyDetects proves the verifier can fail: it reports wrong bytes, a resurrected
// key and a lost key on an engine made to hold them.
func TestVerifyDetects(t *testing.T) {
	g := DefaultGeometry()
	max := g.MaxPayload()
	cfg := EngineConfig(g, engine.CheckpointCompact, false)
	cfg.Periodic = false
	e, err := engine.Format(blockdev.NewMem(g.DeviceSize(), 0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	put := func(idx uint64, p []byte) {
		r, err := e.PutMany([]engine.Key{KeyFor(idx)}, [][]byte{p})
		if err != nil || !r.Results[0] {
			t.Fatalf("put %d: %v %v", idx, r, err)
		}
	}
	put(1, Payload(1, 10, max)) // correct
	bad := Payload(2, 20, max)  // key 2 holds bytes of a version never written...
	bad[len(bad)-1] ^= 1        // ...with one flipped byte
	put(2, bad)                 //
	put(3, Payload(3, 30, max)) // deleted before the checkpoint: resurrected
	log := recs(t, "I P 1 10", "A P 1 10 ok", "I P 2 20", "A P 2 20 ok",
		"I D 3 30", "A D 3 30 ok", "I P 4 40", "A P 4 40 ok", "S 1", "C 1 1")
	ex := Expect(map[uint64]uint64{3: 30}, log)
	res, state := Verify(e, g, ex, true)
	if res.KeysVerified != 1 || state[1] != 10 {
		t.Errorf("verified %d, state %v", res.KeysVerified, state)
	}
	// Key 2's corrupt bytes also leave its acknowledged version missing: lost twice (2, 4).
	if res.CorruptReads != 1 || res.Resurrected != 1 || res.Lost != 2 {
		t.Errorf("corrupt %d resurrected %d lost %d; problems %v", res.CorruptReads, res.Resurrected, res.Lost, res.Problems)
	}
	if res.LeakedSlots != 0 || res.DupSlots != 0 || res.Accounting != 0 || res.Filled != g.Slots-3 {
		t.Errorf("leak %d dup %d accounting %d filled %d", res.LeakedSlots, res.DupSlots, res.Accounting, res.Filled)
	}
}

func writerCommand() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") }

// TestTortureShort is the crash torture's short run: 10 SIGKILLs (make torture does 200).
func TestTortureShort(t *testing.T) {
	kills := 10
	if testing.Short() {
		kills = 4
	}
	if s := os.Getenv("RBCTL_TORTURE_KILLS"); s != "" { // longer runs: make torture, or this
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RBCTL_TORTURE_KILLS=%q: %v", s, err)
		}
		kills = n
	}
	var progress strings.Builder
	sum, err := Run(Options{
		Kills: kills, Seed: 20261129, TornEvery: 3, CorruptEvery: 2, CleanEvery: 5, FaultEvery: 3, FaultProb: 0.05,
		Command: writerCommand, Progress: &progress,
	})
	t.Log("\n" + progress.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary: %+v", *sum)
	if sum.Violations() != 0 {
		t.Fatalf("%d violations: %v", sum.Violations(), sum.Problems)
	}
	if sum.Kills != kills || sum.KeysVerified == 0 || sum.Puts == 0 || sum.Deletes == 0 || sum.Checkpoints == 0 {
		t.Fatalf("the run did not exercise the engine: %+v", *sum)
	}
	if kills >= 8 { // the rotation (two cycles each) reaches every backend by cycle 8
		for _, b := range sum.Backends {
			if sum.CyclesByBackend[b] == 0 {
				t.Fatalf("no cycle through backend %s: %v", b, sum.CyclesByBackend)
			}
		}
	}
	if sum.CorruptUsedOther+sum.CorruptBothRefused != sum.CorruptRuns {
		t.Fatalf("corrupt-container recoveries: %d + %d of %d behaved", sum.CorruptUsedOther, sum.CorruptBothRefused, sum.CorruptRuns)
	}
	// Every bit flip is accounted for: the same state, a reported fallback or rollback, or
	// a refusal; a silent rollback is a violation (above).
	flips := sum.FlipSeqRuns + sum.FlipContainerRuns
	if sum.FlipSeqRuns == 0 || sum.FlipContainerRuns == 0 || sum.FlipSeqRepaired == 0 ||
		sum.FlipSameState+sum.FlipFallbacks+sum.FlipRefused+sum.RollbacksReported != flips {
		t.Fatalf("bit flips: %d seq + %d container runs; %d same state, %d fallbacks, %d refused, %d reported rollbacks; %d damaged seqs noticed",
			sum.FlipSeqRuns, sum.FlipContainerRuns, sum.FlipSameState, sum.FlipFallbacks, sum.FlipRefused, sum.RollbacksReported, sum.FlipSeqRepaired)
	}
}
