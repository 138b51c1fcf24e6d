package client

import (
	"strings"
	"testing"

	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// Keys and salts come from the network: rendering escapes them, and says when it truncated.
func TestRenderEscapesAndMarksTruncation(t *testing.T) {
	var b strings.Builder
	err := WriteList(&b, &p2ppb.ListResponse{Truncated: true, Entries: []*p2ppb.Entry{
		{Key: "m@0x00000000@00\x1b[2J", Size: 3, CacheSalt: "t\n", Handle: -1, Replica: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2J`) || !strings.Contains(out, `t\n`) || !strings.Contains(out, "truncated") {
		t.Fatalf("list output:\n%s", out)
	}
	b.Reset()
	if err := WriteStats(&b, &p2ppb.StatsResponse{Node: "n\x07", Counters: map[string]int64{"peer_hits": 7}, LatencyUs: map[string]float64{"peer_fetch_p50": 812}}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "\x07") || !strings.Contains(out, "peer_hits") || !strings.Contains(out, "812 us") {
		t.Fatalf("stats output:\n%s", out)
	}
}
