package sim

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/lmcache"
)

const lmcacheFDP = `{"type":"raw_block","device_path":"/dev/ng0n1","slot_bytes":1048576,"use_uring_cmd":true,"io_engine":"io_uring",
	"fdp_enabled":true,"fdp_placement_ids":[1,2,3],"fdp_data_placement_policy":"cache_salt_prefix","meta_checkpoint_placement_id":7}`

func loadLMCache(t *testing.T, js string) *lmcache.File {
	t.Helper()
	cfg, warns, err := lmcache.Load(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return &lmcache.File{Config: cfg, Warnings: warns}
}

// An LMCache config's placement runs first, under its name: the workers' buckets get the
// configured identifiers 1, 2, 3 in first-seen order, checkpoints identifier 7, and nothing
// else is written; the --placement policies follow.
func TestRunLMCacheConfig(t *testing.T) {
	lm := loadLMCache(t, lmcacheFDP)
	o := smallOptions()
	o.DeviceSize, o.MeasureCaps, o.Policies, o.LMCache = 1<<30, 1, []string{"none"}, lm
	o.Workload.Preset = "workers:3"
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Policy != "lmcache:cache_salt_prefix" || rep.Runs[1].Policy != "none" {
		t.Fatalf("runs %+v", rep.Runs)
	}
	var handles []int
	labels := map[int]string{}
	for _, h := range rep.Runs[0].HostWAF.Handles {
		handles = append(handles, h.Handle)
		labels[h.Handle] = h.Label
	}
	if !slices.Equal(handles, []int{1, 2, 3, 7}) || labels[7] != "metadata" || !strings.Contains(labels[1], "worker") {
		t.Errorf("handles written %v, labels %v; want the workers on 1..3, checkpoints on 7", handles, labels)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "fdp_placement_ids [1, 2, 3], meta_checkpoint_placement_id 7") {
		t.Errorf("notes %q do not say what the config set", rep.Notes)
	}
}

// A config whose identifiers the model does not have is refused before anything runs.
func TestRunLMCacheConfigRefused(t *testing.T) {
	lm := loadLMCache(t, strings.Replace(lmcacheFDP, "[1,2,3]", "[1,9]", 1))
	o := smallOptions()
	o.LMCache = lm
	ran := false
	o.Progress = func(string, int, int) { ran = true }
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "fdp_placement_ids") || ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
}
