package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// One cache over three devices, the middle one failing every read and write for a stretch
// of ops: its failures are counted in its row and the run goes on; the others have none;
// it serves again after the stretch; the rows add up to the run's totals.
func TestShardedRunCountsOneDevicesErrors(t *testing.T) {
	mems := []*blockdev.Mem{blockdev.NewMem(64<<20, 4096), blockdev.NewMem(64<<20, 4096), blockdev.NewMem(64<<20, 4096)}
	var fd *faultdev.Device
	o := fixedOptions()
	o.Policies = []string{"none"}
	for i, m := range mems {
		var d blockdev.Device = m
		if i == 1 {
			// The stretch starts after the format's and the first requests' I/O.
			fd = faultdev.New(m, 1, faultdev.Rule{Name: "outage", Class: faultdev.ClassRead | faultdev.ClassWrite,
				After: 40, Times: 20, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
			d = fd
		}
		o.Devices = append(o.Devices, d)
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := fd.Counts().ByRule["outage"]; got != 20 {
		t.Fatalf("the outage failed %d ops, want 20 (the workload ended inside it?)", got)
	}
	run := rep.Runs[0]
	if run.Error != "" || run.Ops != 1500 {
		t.Fatalf("run: error %q, %d ops; want no error and all 1500 ops", run.Error, run.Ops)
	}
	if len(run.Devices) != 3 || run.DevicesTotal == nil {
		t.Fatalf("%d device rows, total %v", len(run.Devices), run.DevicesTotal)
	}
	var put, get, ops, errs int64
	for i, d := range run.Devices {
		put, get, ops, errs = put+d.PutBytes, get+d.GetBytes, ops+d.Ops, errs+d.Errors
		if d.Ops == 0 || d.WAF == nil || d.WAFSource != reports.SourceModelled {
			t.Errorf("device %d: %+v; want ops and a modelled WAF", i, d)
		}
		if i != 1 && (d.Errors != 0 || d.FirstError != nil) {
			t.Errorf("device %d had %d errors, but only device 1 failed", i, d.Errors)
		}
	}
	bad := run.Devices[1]
	if bad.Errors < 20 || bad.LastError == nil || bad.LastOK == nil || !(*bad.LastOK > *bad.LastError) || *bad.FirstError > *bad.LastError {
		t.Fatalf("failing device: %d errors, first %v last %v, last ok %v; want >= 20 errors and a success after the last",
			bad.Errors, ptr(bad.FirstError), ptr(bad.LastError), ptr(bad.LastOK))
	}
	if put != run.WrittenBytes || get != run.ReadBytes {
		t.Errorf("device rows put %d / got %d bytes, the run wrote %d / read %d", put, get, run.WrittenBytes, run.ReadBytes)
	}
	if tot := run.DevicesTotal; tot.Ops != ops || tot.Errors != errs || tot.PutBytes != put || tot.GetBytes != get {
		t.Errorf("total row %+v does not add up (ops %d errors %d put %d get %d)", *tot, ops, errs, put, get)
	}
	if n, names := rep.DeviceErrors(); n != errs || len(names) != 1 || names[0] != run.Devices[1].Device {
		t.Errorf("DeviceErrors = %d %v", n, names)
	}
	if run.HostWAF == nil || run.HostWAF.HostBytes == 0 || run.StoreFailed == 0 {
		t.Errorf("host WAF %v, %d store failures", run.HostWAF, run.StoreFailed)
	}
}

func ptr(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Files given twice (under two names) are refused before anything is created or touched.
func TestShardedRefusesOneDeviceTwice(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	o := fixedOptions()
	o.Paths, o.Create = []string{a, filepath.Join(dir, "b.img"), filepath.Join(dir, ".", "a.img")}, 64<<20
	if _, err := Run(context.Background(), o); !errors.Is(err, devices.ErrSameDevice) {
		t.Fatalf("a.img twice: %v, want ErrSameDevice", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused bench created %d files", len(ents))
	}
	if err := os.WriteFile(a, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, filepath.Join(dir, "hard.img")); err != nil {
		t.Skip(err)
	}
	if err := devices.Distinct([]string{a, filepath.Join(dir, "hard.img")}); !errors.Is(err, devices.ErrSameDevice) {
		t.Fatalf("a hard link: %v, want ErrSameDevice", err)
	}
	if err := devices.Distinct([]string{"mem:64M", "mem:64M", a}); err != nil {
		t.Fatalf("two memory devices are two devices: %v", err)
	}
}

// With kv-rank routing over N devices the backend gives chunk h rank h mod N: each rank's
// chunks land on device rank (LMCache's per_tp_device_paths).
func TestBackendRanksFollowDevices(t *testing.T) {
	b := &Backend{Model: "m", Ranks: 4}
	var ks []workloads.Key
	for h := uint64(0); h < 64; h++ {
		ks = append(ks, workloads.Key{Hash: h * 7919})
	}
	for i, k := range b.keys(ks) {
		want := int(ks[i].Hash % 4)
		if r, _ := k.KVRank(); int(r) != want || sharded.ShardOf(sharded.RouteKVRank, k, 4) != want {
			t.Fatalf("chunk %d: rank %d, shard %d; want %d", ks[i].Hash, r, sharded.ShardOf(sharded.RouteKVRank, k, 4), want)
		}
	}
}

// One device keeps today's behaviour: its first I/O error ends the run (an error on the
// run), and its row counts the failure.
func TestOneDeviceErrorEndsTheRun(t *testing.T) {
	fd := faultdev.New(blockdev.NewMem(64<<20, 4096), 1, faultdev.Rule{Name: "outage", Class: faultdev.ClassWrite,
		After: 40, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
	o := fixedOptions()
	o.Policies, o.Device = []string{"none"}, fd
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Runs[0]
	if run.Error == "" || run.Ops >= 1500 || len(run.Devices) != 1 || run.Devices[0].Errors == 0 {
		t.Fatalf("error %q after %d ops, devices %+v; want the run stopped by the device error", run.Error, run.Ops, run.Devices)
	}
	if strings.Contains(run.Error, "shard 0") {
		t.Errorf("one device's error names a shard: %s", run.Error)
	}
}

// A missing node under /dev is refused before any other device is created.
func TestBenchRefusesMissingDevNodeBeforeCreating(t *testing.T) {
	dir := t.TempDir()
	o := fixedOptions()
	o.Paths, o.Create = []string{filepath.Join(dir, "a.img"), "/dev/rbctl-test-no-such-device"}, 64<<20
	if _, err := Run(context.Background(), o); !errors.Is(err, blockdev.ErrMissingDevNode) {
		t.Fatalf("bench with a missing /dev node: %v, want ErrMissingDevNode", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused bench created %d files", len(ents))
	}
}

// A bench refused once its devices are open (here: a slot budget larger than the cache)
// removes the files its --create made, and leaves a file that existed alone.
func TestRefusedBenchRemovesTheFilesItCreated(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	if err := os.WriteFile(b, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	o := fixedOptions()
	o.Paths, o.Create, o.Force = []string{a, b}, 64<<20, true
	budgets, err := placement.ParseBudgets("*=1000000")
	if err != nil {
		t.Fatal(err)
	}
	o.Workload.Budgets = budgets
	if _, err := Run(context.Background(), o); err == nil {
		t.Fatal("a budget over the cache's slots was accepted")
	}
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a.img, created by the refused bench, is still there: %v", err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Errorf("b.img, which existed before, was removed: %v", err)
	}
}
