package placement

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// GPUsEnv overrides the node's GPU count (NodeGPUs): a whole number, 0 included.
const GPUsEnv = "RBCTL_GPUS"

// NodeGPUs is the node's visible GPU count, which bounds LMCache's cache_salt_rank (its
// adapter takes torch's device_count(), 0 when CUDA is unavailable): RBCTL_GPUS when set;
// else, when CUDA_VISIBLE_DEVICES is set, the number of its comma-separated entries up to
// the first empty or negative one (CUDA's rule; "" hides every GPU); else the NVIDIA GPUs
// the driver lists in /proc/driver/nvidia/gpus, else the /dev/nvidiaN nodes; else 0.
// An unreadable RBCTL_GPUS is an error (a typo must not silently turn placement off).
func NodeGPUs() (int, error) {
	if v, ok := os.LookupEnv(GPUsEnv); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > MaxLocalRanks {
			return 0, fmt.Errorf("%w: %s=%q: want a GPU count 0..%d", ErrSpec, GPUsEnv, v, MaxLocalRanks)
		}
		return n, nil
	}
	physical := countGPUs()
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		n := 0
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" || strings.HasPrefix(e, "-") {
				break
			}
			n++
		}
		if physical > 0 {
			n = min(n, physical)
		}
		return n, nil
	}
	return physical, nil
}

func countGPUs() int {
	if ents, err := os.ReadDir("/proc/driver/nvidia/gpus"); err == nil && len(ents) > 0 {
		return min(len(ents), MaxLocalRanks)
	}
	nodes, _ := filepath.Glob("/dev/nvidia[0-9]*")
	n := 0
	for _, p := range nodes {
		if _, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "nvidia")); err == nil {
			n++
		}
	}
	return min(n, MaxLocalRanks)
}
