package clusterbench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/reports"
)

// small is a cluster bench that runs in seconds: 3 nodes on 128 MiB emulated SSDs.
func small(t *testing.T) Options {
	return Options{Dir: t.TempDir(), Nodes: 3, DeviceBytes: 128 << 20, RUBytes: 1 << 20, Handles: 8, OP: 0.15,
		ChunkBytes: 64 << 10, Tenants: 3, PrefixChunks: 8, UniqueChunks: 4, Requests: 90, Seed: 7}
}

func TestSharingFetchesPrefixesInsteadOfComputing(t *testing.T) {
	rs, err := Run(context.Background(), small(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(Modes) {
		t.Fatalf("%d results, want %d", len(rs), len(Modes))
	}
	by := map[Mode]Result{}
	for _, r := range rs {
		by[r.Mode] = r
		if r.Total.WrongChunks != 0 || r.Total.Checksum != 0 {
			t.Errorf("%s: %d wrong chunks, %d checksum errors", r.Mode, r.Total.WrongChunks, r.Total.Checksum)
		}
		if r.Total.HostBytes == 0 || r.Total.DeviceWAF == nil {
			t.Errorf("%s: no device writes measured", r.Mode)
		}
		if got := r.Total.LocalHits + r.Total.PeerHits + r.Total.Computed + r.Total.Recomputed; got != r.Total.Chunks {
			t.Errorf("%s: hits+computed = %d, chunks %d", r.Mode, got, r.Total.Chunks)
		}
	}
	off, shared, fetch := by[Off].Total, by[Shared].Total, by[FetchOnly].Total
	if off.PeerHits != 0 || off.PeerBytesIn != 0 {
		t.Errorf("off: %d peer hits, %d bytes in", off.PeerHits, off.PeerBytesIn)
	}
	// Without peers each node computes each tenant's prefix; with them, one node does.
	if shared.PeerHits == 0 || shared.Computed >= off.Computed {
		t.Errorf("shared: %d peer hits, computed %d (off %d)", shared.PeerHits, shared.Computed, off.Computed)
	}
	if fetch.ReplicaBytes != 0 || fetch.HostBytes >= off.HostBytes {
		t.Errorf("fetch-only: replica bytes %d, host bytes %d (off %d)", fetch.ReplicaBytes, fetch.HostBytes, off.HostBytes)
	}
	var b bytes.Buffer
	if err := WriteText(&b, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "dev WAF (model)") {
		t.Errorf("text lacks the model label:\n%s", b.String())
	}
	if _, err := os.Stat("/proc/loadavg"); err == nil {
		for _, r := range rs {
			if len(strings.Fields(r.LoadStart)) != 3 || len(strings.Fields(r.LoadEnd)) != 3 {
				t.Errorf("%s: load %q → %q", r.Mode, r.LoadStart, r.LoadEnd)
			}
		}
		if n := strings.Count(b.String(), "  load average (1, 5, 15 min) "); n != len(rs) {
			t.Errorf("%d load lines for %d modes:\n%s", n, len(rs), b.String())
		}
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if len(l) > reports.TextWidth {
			t.Errorf("line of %d bytes, over %d: %s", len(l), reports.TextWidth, l)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{}, {Dir: t.TempDir(), Nodes: 1}, {Dir: t.TempDir(), ChunkBytes: 1000}, {Dir: t.TempDir(), PrefixChunks: 300}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestGossipDirectoryLocatesPrefixes(t *testing.T) {
	o := small(t)
	o.Gossip, o.Modes, o.Interval = true, []Mode{Off, FetchOnly}, 10*time.Millisecond
	rs, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	off, fo := rs[0].Total, rs[1].Total
	if !rs[1].Gossip || rs[0].Gossip {
		t.Fatalf("gossip flags: off %v, fetch-only %v", rs[0].Gossip, rs[1].Gossip)
	}
	if fo.PeerHits == 0 || fo.WrongChunks != 0 || fo.HostBytes >= off.HostBytes {
		t.Errorf("fetch-only over gossip: %d peer hits, %d wrong, host bytes %d (off %d)", fo.PeerHits, fo.WrongChunks, fo.HostBytes, off.HostBytes)
	}
	if fo.GossipBytesOut == 0 || fo.PeerLookups == 0 || fo.EmptyLookups >= fo.PeerLookups {
		t.Errorf("gossip %d bytes, %d lookups, %d empty", fo.GossipBytesOut, fo.PeerLookups, fo.EmptyLookups)
	}
}

// With Deallocate the nodes deallocate what they evict (their emulated SSDs count it), and
// the result says which setting ran; without it nothing is deallocated. Two outputs of the
// FTL model are not compared here: only that the setting reaches the nodes.
func TestDeallocateReachesTheNodes(t *testing.T) {
	for _, d := range []node.Deallocation{node.DeallocateDevices, node.DeallocateNone} {
		o := small(t)
		o.DeviceBytes, o.Requests, o.UniqueChunks, o.Modes, o.Deallocate = 32<<20, 240, 8, []Mode{Off}, d
		o.OP = 0.5 // GC room for 8 handles of 1 MiB RUs on 32 MiB (Options.fill refuses less)
		rs, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		tot := rs[0].Total
		if tot.Evicted == 0 {
			t.Fatalf("deallocate %q: no eviction in %d chunks on 32 MiB devices", d, tot.Chunks)
		}
		want := map[node.Deallocation]node.Deallocation{node.DeallocateDevices: "devices", node.DeallocateNone: "none"}[d]
		if rs[0].Deallocate != want {
			t.Errorf("result says deallocate %q, ran %q", rs[0].Deallocate, want)
		}
		if on := d == node.DeallocateDevices; on && tot.Deallocated < tot.Evicted || !on && tot.Deallocated != 0 {
			t.Errorf("deallocate %q: %d slots deallocated for %d evicted", d, tot.Deallocated, tot.Evicted)
		}
	}
}
