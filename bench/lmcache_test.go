package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/lmcache"
)

// An LMCache config with per_tp_device_paths: bench runs one cache over its devices, rank r
// on device r, with the config's layout (its v1 checkpoint, legacy keys), as a first run
// named for its placement, then the other policies on the same layout.
func TestBenchWithLMCacheConfig(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	conf := filepath.Join(dir, "lmcache.json")
	body := fmt.Sprintf(`{"extra_config":{"rust_raw_block.per_tp_device_paths":{"1":%q,"0":%q},"rust_raw_block.slot_bytes":69632,"rust_raw_block.meta_total_bytes":2097152}}`, b, a)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := lmcache.LoadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	o := fixedOptions()
	o.Policies, o.LMCache, o.Create, o.Workload.Requests = []string{"none"}, l, 64<<20, 600
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Policy != "lmcache:none" || rep.Runs[1].Policy != "none" {
		t.Fatalf("runs %+v", rep.Runs)
	}
	for _, run := range rep.Runs {
		if run.Error != "" || len(run.Devices) != 2 || run.Devices[0].Device != a || run.Devices[1].Device != b {
			t.Fatalf("%s: error %q, devices %+v", run.Policy, run.Error, run.Devices)
		}
		if run.Devices[0].Ops == 0 || run.Devices[1].Ops == 0 {
			t.Fatalf("%s: a rank's device served nothing: %+v", run.Policy, run.Devices)
		}
	}
	dev, err := blockdev.OpenFile(a, blockdev.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := engine.DetectConfig(dev)
	if err != nil {
		t.Fatal(err)
	}
	if c.CheckpointFormat != engine.CheckpointLMCacheV1 || c.Namespace != engine.NamespaceLegacy || c.SlotBytes != 69632 || c.MetaTotalBytes != 2<<20 {
		t.Fatalf("device a holds format %s, namespace %s, slot %d, meta %d; want the config's", c.CheckpointFormat, c.Namespace, c.SlotBytes, c.MetaTotalBytes)
	}
	o.Paths = []string{a}
	if _, err := Run(context.Background(), o); !errors.Is(err, ErrDevicesTwice) {
		t.Fatalf("a device and a config: %v, want ErrDevicesTwice", err)
	}
}

// per_tp_device_paths {"0": a, "2": b}: worker 2's keys on b, worker 0's on a, as LMCache
// routes them (rank mod 2 sent worker 2 to a before); the workload carries ranks 0 and 2.
func TestBenchPerTPRanksRouteToTheirDevice(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	conf := filepath.Join(dir, "lmcache.json")
	body := fmt.Sprintf(`{"extra_config":{"rust_raw_block.per_tp_device_paths":{"2":%q,"0":%q},"rust_raw_block.slot_bytes":69632,"rust_raw_block.meta_total_bytes":2097152}}`, b, a)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := lmcache.LoadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	o := fixedOptions()
	o.Policies, o.LMCache, o.Create, o.Workload.Requests = nil, l, 64<<20, 300
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if run := rep.Runs[0]; run.Error != "" || run.Devices[0].Ops == 0 || run.Devices[1].Ops == 0 {
		t.Fatalf("run %+v", run)
	}
	for path, worker := range map[string]string{a: "0", b: "2"} {
		dev, err := blockdev.OpenFile(path, blockdev.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := engine.DetectConfig(dev)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Periodic, cfg.FinalCheckpoint = false, false
		e, err := engine.Open(dev, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		e.Entries(func(k engine.Key, _ engine.EntryMeta) bool {
			if f := strings.Split(k.String(), "@"); len(f) < 3 || f[2] != worker {
				t.Errorf("%s holds %q, want worker %s's keys only", path, k.String(), worker)
				return false
			}
			n++
			return true
		})
		if n == 0 {
			t.Errorf("%s holds no key", path)
		}
		e.CloseNoCheckpoint()
	}
}
