package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/workloads"
)

// bench replays a Mooncake trace through the engine: every request runs (the warm-up is
// dropped), the report carries the trace and the admission policy, tokens saved stay under
// the ceiling, and second-hit refuses first misses.
func TestRunMooncakeTrace(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 200; i++ {
		c := i % 7
		ids := []string{"0"}
		for j := 0; j <= i/7; j++ {
			ids = append(ids, fmt.Sprint(1000*c+j+1))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "hash_ids": [%s]}`+"\n", i, 512*len(ids)-100, strings.Join(ids, ", "))
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, adm := range []string{"all", "second-hit"} {
		o := fixedOptions()
		o.Policies = []string{"cache-salt"}
		o.Workload = workloads.Spec{Kind: "mooncake:" + path, Model: "tiny", ChunkTokens: 256, Util: 0.9, Workers: 1, Admission: adm}
		o.Device = blockdev.NewMem(64<<20, 4096)
		o.Warmup = 1 // a trace ignores it: measured whole
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Runs[0]
		if rep.Trace == nil || rep.Trace.Requests != 200 || r.Requests != 200 || r.Trace == nil || r.Admission != adm || r.Error != "" {
			t.Fatalf("%s: trace %+v, run %+v", adm, rep.Trace, r)
		}
		if r.Trace.TokensRequested != rep.Trace.Tokens || r.Trace.TokensSaved == 0 || r.Trace.TokensSaved > rep.Trace.CeilingTokens {
			t.Errorf("%s: tokens %+v, trace %+v", adm, r.Trace, rep.Trace)
		}
		if adm == "second-hit" && r.Trace.AdmissionRefused == 0 {
			t.Errorf("second-hit refused nothing")
		}
		if _, _, ok := r.FlashPerToken(); !ok {
			t.Errorf("%s: no flash bytes per token saved", adm)
		}
	}
}
