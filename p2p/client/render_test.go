package client

import (
	"encoding/json"
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

// Devices and members get rows of their own; the rest stays a counter table.
func TestRenderDevicesAndMembers(t *testing.T) {
	var b strings.Builder
	err := WriteStats(&b, &p2ppb.StatsResponse{Node: "a", Counters: map[string]int64{
		"members": 2, "dev0_slots_used": 5, "dev1_slots_used": 7, "member/b-1/state": 0, "member/b-1/filter_age_ms": 120,
		"member/b-1/filter_bytes": 1024, "member/c\x1b/state": 2, "member/c\x1b/failed_ms": 900}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"members", "device", "b-1", "alive", "120 ms", "failed (rejoining) for 900 ms", `c\x1b`} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "dev0_slots_used") || strings.Contains(out, "member/") || strings.Contains(out, "\x1b") {
		t.Fatalf("raw counters left in\n%s", out)
	}
}

// Counter names come from the node: whatever they are, rendering neither fails nor passes
// a control character through.
func FuzzWriteStats(f *testing.F) {
	f.Add("member/b/state", int64(2), "dev0_slots_used")
	f.Add("member//", int64(-1), "dev99999999999999999999_x")
	f.Add("a\x1b[2J", int64(7), "member/\x07/filter_age_ms")
	f.Fuzz(func(t *testing.T, k1 string, v int64, k2 string) {
		var b strings.Builder
		err := WriteStats(&b, &p2ppb.StatsResponse{Node: k2, Counters: map[string]int64{k1: v, k2: v, "member/" + k1 + "/state": v}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.String() {
			if r < 0x20 && r != '\n' {
				t.Fatalf("control character %q in output for %q, %q", r, k1, k2)
			}
		}
	})
}

// remote's JSON spells a key as ls does (size_bytes, no handle without a directive, an
// empty list rather than none) and a source in words (third hostile battery, doubts).
func TestRemoteJSONLikeTheLocalCommands(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{ListDocument(&p2ppb.ListResponse{}), `{"keys":[],"truncated":false}`},
		{ListDocument(&p2ppb.ListResponse{Entries: []*p2ppb.Entry{{Key: "k", Size: 3, Handle: -1}, {Key: "h", Size: 4, Handle: 2, CacheSalt: "s"}}}),
			`{"keys":[{"key":"k","size_bytes":3,"replica":false},{"key":"h","size_bytes":4,"cache_salt":"s","handle":2,"replica":false}],"truncated":false}`},
		{GetDocument(&p2ppb.Chunk{Source: p2ppb.Source_SOURCE_LOCAL, Payload: []byte{1}}), `{"source":"local","size_bytes":1,"payload":"AQ=="}`},
		{GetDocument(&p2ppb.Chunk{Source: p2ppb.Source_SOURCE_PEER, Peer: "b", Payload: []byte{}}), `{"source":"peer","peer":"b","size_bytes":0,"payload":""}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("got %s (%v), want %s", b, err, c.want)
		}
	}
}
