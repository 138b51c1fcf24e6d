package sim

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/sys/memlimit"
	"github.com/rbctl/rbctl/workloads"
)

// A run whose model the process's limits cannot hold is refused by RunOne with an error
// naming the limit, before it allocates (the runtime would die of the allocation).
func TestRunOneRefusesWhatTheLimitsCannotHold(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	debug.SetMemoryLimit(64 << 20)
	fc := simFTL(8)
	fc.LogicalBytes = 8 << 40 // 8 TiB at 64 KiB units: a model of hundreds of MiB
	g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
	_, err := RunOne(context.Background(), RunConfig{Gen: g, Driver: workloads.DriverConfig{TargetUtil: 0.9}, FTL: fc,
		Policy: "none", SlotBytes: 4096 + 1<<20})
	var me *memlimit.Error
	if !errors.As(err, &me) || !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "limit: GOMEMLIMIT") {
		t.Fatalf("8 TiB under GOMEMLIMIT 64 MiB: %v", err)
	}
}
