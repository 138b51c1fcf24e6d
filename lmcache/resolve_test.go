package lmcache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

const fdpBase = `"device_path":"/dev/ng0n1","slot_bytes":65536,"io_engine":"io_uring","use_uring_cmd":true,"use_odirect":false`

func fdpConfig(t *testing.T, extra string) FDP {
	t.Helper()
	c, _ := load(t, `{`+fdpBase+extra+`}`)
	return c.FDP
}

// TestResolve: LMCache's placement identifiers become the device's handles through its
// PID table (handle i has devicePIDs[i]), with LMCache's discovery checks.
func TestResolve(t *testing.T) {
	device := []uint16{0, 9, 4, 2, 7} // RUH status order: handle 1 has PID 9, ...
	cases := []struct {
		name, extra string
		pids        string // DataPIDs
		pool        string
		meta        placement.Handle
		policy      string
		affinity    bool
		err         string // field: message part
	}{
		{"defaults", `,"fdp_enabled":true`, "[9 4 2 7]", "[1 2 3 4]", placement.None, "cache_salt_prefix:handles=1/2/3/4", true, ""},
		{"metadata excluded", `,"fdp_enabled":true,"meta_checkpoint_placement_id":4`, "[9 2 7]", "[1 3 4]", 2, "cache_salt_prefix:handles=1/3/4", true, ""},
		{"configured ids in their order", `,"fdp_enabled":true,"fdp_placement_ids":[7,9],"fdp_data_placement_policy":"cache_salt_rank","fdp_slot_reuse_policy":"none"`, "[7 9]", "[4 1]", placement.None, "cache_salt_rank:gpus=0:handles=4/1", false, ""},
		{"policy none", `,"fdp_enabled":true,"fdp_data_placement_policy":"none"`, "[9 4 2 7]", "[1 2 3 4]", placement.None, "<nil>", true, ""},
		{"metadata only, FDP off", `,"meta_checkpoint_placement_id":7`, "[]", "[]", 4, "<nil>", false, ""},
		{"id not on device", `,"fdp_enabled":true,"fdp_placement_ids":[9,5]`, "", "", 0, "", false, "fdp_placement_ids: 5 is not reported by the device (non-zero identifiers [9, 4, 2, 7])"},
		{"metadata not on device", `,"fdp_enabled":true,"meta_checkpoint_placement_id":3`, "", "", 0, "", false, "meta_checkpoint_placement_id: 3 is not reported by the device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := fdpConfig(t, tc.extra).Resolve(device, 0)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			policy := "<nil>"
			if p.Policy != nil {
				policy = p.Policy.Name()
			}
			if got := words(p.DataPIDs, p.Pool, p.MetadataHandle, policy, p.SlotAffinity); got != words(tc.pids, tc.pool, tc.meta, tc.policy, tc.affinity) {
				t.Fatalf("resolved %s, want %s", got, words(tc.pids, tc.pool, tc.meta, tc.policy, tc.affinity))
			}
		})
	}
	// Devices without usable identifiers.
	f := fdpConfig(t, `,"fdp_enabled":true`)
	for _, dev := range [][]uint16{nil, {0}} {
		if _, err := f.Resolve(dev, 0); err == nil || !strings.Contains(err.Error(), "fdp_enabled: the device reports no") {
			t.Errorf("device %v: %v", dev, err)
		}
	}
	f = fdpConfig(t, `,"fdp_enabled":true,"meta_checkpoint_placement_id":9`)
	if _, err := f.Resolve([]uint16{0, 9}, 0); err == nil || !strings.Contains(err.Error(), "no non-zero data placement identifier remains") {
		t.Errorf("only the metadata id: %v", err)
	}
}

// metaWrites records the handles of writes into the metadata region.
type metaWrites struct {
	*blockdev.Mem
	metaEnd int64
	mu      sync.Mutex
	handles map[placement.Handle]int
}

func (d *metaWrites) Submit(ops []blockdev.Op) error {
	d.mu.Lock()
	for _, op := range ops {
		if op.Write && op.Off < d.metaEnd {
			d.handles[op.Handle]++
		}
	}
	d.mu.Unlock()
	return d.Mem.Submit(ops)
}

// TestResolvedRankPolicyOnDevice: cache_salt_rank from a file, resolved on a device, gives
// each bucket × local rank its own PID from the pool, at most localRanks per bucket.
func TestResolvedRankPolicyOnDevice(t *testing.T) {
	f := fdpConfig(t, `,"fdp_enabled":true,"fdp_data_placement_policy":"cache_salt_rank","fdp_placement_ids":[1,2,3,4,5,6]`)
	device := []uint16{0, 1, 2, 3, 4, 5, 6, 7}
	p, err := f.Resolve(device, 2) // 2 visible GPUs
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, salt := range []string{"rag:a", "chat:b", "Rag:c", "plain"} {
		for lr := range 4 {
			h := p.Policy.Place(placement.Write{CacheSalt: salt, KVRank: placement.PackKVRank(4, uint32(lr), 4, uint32(lr))})
			pid := "-"
			if h != placement.None {
				pid = fmt.Sprint(device[h])
			}
			got = append(got, pid)
		}
	}
	// rag ranks 0,1 → PIDs 1,2; ranks 2,3 over the 2-GPU quota; chat → 3,4; Rag:c = rag.
	if want := "1 2 - - 3 4 - - 1 2 - - - - - -"; strings.Join(got, " ") != want {
		t.Fatalf("PIDs %s, want %s", strings.Join(got, " "), want)
	}
}

// TestConfigDrivesEngine: a file's layout and FDP settings, resolved and applied, drive a
// real engine: data slots land on the bucket's PID handle and checkpoints on the metadata
// handle.
func TestConfigDrivesEngine(t *testing.T) {
	c, _ := load(t, `{`+fdpBase+`,"meta_total_bytes":1048576,"block_align":4096,"header_bytes":4096,"meta_enable_periodic":false,
		"fdp_enabled":true,"fdp_placement_ids":[3,5],"meta_checkpoint_placement_id":7}`)
	dev := &metaWrites{Mem: blockdev.NewMem(16<<20, 4096), metaEnd: 1 << 20, handles: map[placement.Handle]int{}}
	cfg := c.Devices[0].Engine
	p, err := c.FDP.Resolve([]uint16{0, 1, 2, 3, 4, 5, 6, 7}, 0) // mem: handle i has PID i
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(&cfg)
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := []engine.Key{
		engine.ObjectKey("m", 0, []byte{1}, "rag:a"),
		engine.ObjectKey("m", 0, []byte{2}, "chat:b"),
		engine.ObjectKey("m", 0, []byte{3}, "RAG:c"),
		engine.ObjectKey("m", 0, []byte{4}, "untagged"),
	}
	payload := make([]byte, 1000)
	if _, err := e.PutMany(keys, [][]byte{payload, payload, payload, payload}); err != nil {
		t.Fatal(err)
	}
	want := []placement.Handle{3, 5, 3, placement.None}
	for i, k := range keys {
		m, ok := e.Lookup(k)
		if !ok || m.Handle != want[i] {
			t.Errorf("key %d on handle %d (found %v), want %d", i, m.Handle, ok, want[i])
		}
	}
	if !cfg.SlotAffinity {
		t.Error("pid_affinity did not set SlotAffinity")
	}
	if err := e.Close(); err != nil { // writes the final checkpoint
		t.Fatal(err)
	}
	if len(dev.handles) != 1 || dev.handles[7] == 0 {
		t.Errorf("metadata writes by handle %v, want all on handle 7", dev.handles)
	}
	// LMCache can read what the engine wrote: a v1 JSON checkpoint.
	if d, err := engine.DetectConfig(dev.Mem.Reopen()); err != nil || d.CheckpointFormat != engine.CheckpointLMCacheV1 {
		t.Errorf("detected %s, %v; want an lmcache-v1 checkpoint", d.CheckpointFormat, err)
	}
}
