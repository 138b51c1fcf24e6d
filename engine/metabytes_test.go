package engine

import (
	"math"
	"testing"
)

func TestMetaBytesFor(t *testing.T) {
	for _, c := range []struct {
		capacity, slot int64
		align          int
		format         CheckpointFormat
		want           int64
	}{
		{0, 1 << 20, 4096, CheckpointCompact, 1 << 20},                // no slots: the 1 MiB floor
		{64 << 20, 64 << 10, 4096, CheckpointCompact, 1 << 20},        // 1024 slots: 2*(4K+128K+64K) < 1 MiB
		{1 << 30, 64 << 10, 4096, CheckpointCompact, 8 << 20},         // 16384 slots: 2*(4K+2M+64K) → 8 MiB
		{1 << 30, 64 << 10, 4096, CheckpointLMCacheV1, 16 << 20},      // 256 B a slot: 2*(4K+4M+64K) → 16 MiB
		{4 << 30, 64 << 10, 4096, CheckpointLMCacheV1, 64 << 20},      // 2*(4K+16M+64K) is just over 32 MiB
		{4 << 40, 1 << 20, 4096, CheckpointCompact, 2 << 30},          // 4M slots: 2*(512 MiB+...) → 2 GiB
		{math.MaxInt64, 1, math.MaxInt32, CheckpointCompact, 1 << 49}, // absurd inputs end, without overflow
	} {
		got := MetaBytesFor(c.capacity, c.slot, c.align, c.format)
		if got != c.want {
			t.Errorf("MetaBytesFor(%d, %d, %d, %s) = %d, want %d", c.capacity, c.slot, c.align, c.format, got, c.want)
		}
		if got&(got-1) != 0 {
			t.Errorf("MetaBytesFor(%d, %d, ...) = %d, not a power of two", c.capacity, c.slot, got)
		}
	}
}
