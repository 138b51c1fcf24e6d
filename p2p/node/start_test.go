package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// formatFile makes a formatted 8 MiB cache file of 64 KiB payloads at dir/name.
func formatFile(t testing.TB, dir, name string) string {
	t.Helper()
	return formatFileOf(t, dir, name, 8<<20, 64<<10)
}

// formatFileOf makes a formatted cache file of size bytes and payloads of payload bytes.
func formatFileOf(t testing.TB, dir, name string, size int64, payload int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = int64(4096+payload), 0 // 0: sized for the file (cache.Config)
	_, _, err := cache.Format(cache.FormatOptions{Path: p, Create: size, Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(p, blockdev.FileOptions{}) }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// formatLoop formats a cache of 16 KiB payloads on a loop device over a 16 MiB file, as
// formatFileOf does on a file (skipped where no loop device can be attached).
func formatLoop(t testing.TB) string {
	t.Helper()
	dev := looptest.New(t, 16<<20, looptest.Options{DirectIO: true})
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 4096+16<<10, 0
	_, _, err := cache.Format(cache.FormatOptions{Path: dev, Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(dev, blockdev.FileOptions{}) }})
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// startConfig serves devs alone on loopback, any ports.
func startConfig(devs ...string) Config {
	return Config{Name: "t", Devices: devs, Listen: "127.0.0.1:0", Cluster: cluster.Config{Cluster: "none"}, Eviction: EvictLRU}
}

// A node Start built serves its devices over gRPC and RESP, records what it answers, and
// Close writes the final checkpoint: a second Start on the same file finds the key, and
// the recording's header has the node's capacity.
func TestStartServesAndCloseCheckpoints(t *testing.T) {
	dir := t.TempDir()
	dev := formatFile(t, dir, "a.img")
	cfg := startConfig(dev)
	cfg.CheckpointInterval = time.Hour // only Close checkpoints
	cfg.RESP = &RESPConfig{Listen: "127.0.0.1:0"}
	rec := filepath.Join(dir, "rec.jsonl")
	cfg.Record = &l2trace.Options{Path: rec, MaxBytes: 1 << 20}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	put(t, dial(t, n), 1, 1000)
	c, err := net.Dial("tcp", n.RESPAddr())
	if err != nil {
		t.Fatal(err)
	}
	exchangeLine(t, c, cmd("SET", "m@00000000@0@0a0b@s", "v"), "+OK\r\n")
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = Start(context.Background(), startConfig(dev))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if u := n.Usage(); u.SlotsUsed != 2 {
		t.Fatalf("after a restart %d keys, want the 2 stored before Close", u.SlotsUsed)
	}
	r, err := l2trace.ReadFiles(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Records) != 2 || len(r.Nodes) != 1 || r.Nodes[0].Capacity.Slots != n.Usage().SlotsTotal || r.Nodes[0].Eviction != "lru" || r.Nodes[0].Node != "t" {
		t.Fatalf("recording: %d records, headers %+v", len(r.Records), r.Nodes)
	}
}

// exchangeLine writes in and reads one line back.
func exchangeLine(t *testing.T, c net.Conn, in, want string) {
	t.Helper()
	c.Write([]byte(in))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(want))
	if _, err := c.Read(buf); err != nil || string(buf) != want {
		t.Fatalf("%q: got %q %v, want %q", in, buf, err, want)
	}
}

// Start refuses a bad config before it opens anything (a device that does not exist is not
// even looked at), naming the fields; Render spells them as a caller does.
func TestStartRefusesBadConfigFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.img")
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Eviction = "mru" }, "{Eviction}: "},
		{func(c *Config) { c.Admission = "maybe" }, "{Admission}: "},
		{func(c *Config) { c.RegionBytes = 1 << 20 }, "{RegionBytes} is for {Eviction} region, not lru"},
		{func(c *Config) { c.RESP = &RESPConfig{Listen: "6379"} }, `{RESP.Listen} "6379": want HOST:PORT`},
		{func(c *Config) { c.RESP = &RESPConfig{Listen: "127.0.0.1:99999"} }, `{RESP.Listen} "127.0.0.1:99999": port 99999 is out of range`},
		{func(c *Config) { c.Listen = ":notaport" }, `{Listen} ":notaport": port "notaport" is neither a number nor a known service`},
		{func(c *Config) { c.MetricsListen = "127.0.0.1:-1" }, "{MetricsListen} \"127.0.0.1:-1\": port -1 is out of range"},
		{func(c *Config) { c.Peers = []string{"bad peer"} }, `{Peers} "bad peer": want HOST:PORT`},
		{func(c *Config) { c.Peers = []string{"10.0.0.1:7470", "localhost:notaport"} }, `{Peers} "localhost:notaport": port "notaport" is neither`},
		{func(c *Config) { c.Peers = []string{":7470"} }, `{Peers} ":7470": "" is no host to dial`},
		{func(c *Config) { c.Peers = []string{"a:7470/b:0"} }, `{Peers} "a:7470/b:0": port 0 cannot be dialled`},
		{func(c *Config) { c.Cluster.Seeds = []string{"127.0.0.1:notaport"} }, `{Cluster.Seeds} "127.0.0.1:notaport": port "notaport" is neither`},
		{func(c *Config) { c.TLSFiles = secure.Files{CA: "ca.pem"} }, "go together; only {TLSFiles.CA} given"},
		{func(c *Config) { c.Limits.MaxLeases, c.Limits.MaxLeasesPerClient = 10, 11 }, "{Limits.MaxLeasesPerClient} 11 is above {Limits.MaxLeases} 10"},
		{func(c *Config) { c.GossipKeyFile = "k" }, "{GossipKeyFile} encrypts cluster gossip"},
		{func(c *Config) { c.Advertise = "0.0.0.0:7470" }, "is no address a peer can dial"},
		{func(c *Config) {
			c.Record = &l2trace.Options{Path: filepath.Join(dir, "no", "r.jsonl"), MaxBytes: 1 << 20}
		}, "its directory does not exist"},
		{func(c *Config) { c.Devices = nil }, "{Devices}: no device given"},
	} {
		cfg := startConfig(missing)
		c.edit(&cfg)
		_, err := Start(context.Background(), cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("want %q, got %v", c.want, err)
			continue
		}
		if strings.Contains(ce.Error(), "{") || !strings.HasPrefix(ce.Error(), "node: ") {
			t.Errorf("Error() %q: fields not spelt", ce.Error())
		}
		if r := ce.Render(func(f string) string { return "--" + strings.ToLower(f) }); strings.Contains(r, "{") {
			t.Errorf("Render %q", r)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused config created the device: %v", err)
	}
}

// Addresses a node is given pass the check in their usual spellings.
func TestConfigCheckTakesGoodAddresses(t *testing.T) {
	cfg := startConfig(filepath.Join(t.TempDir(), "a.img"))
	cfg.Listen, cfg.DataListen, cfg.MetricsListen = ":0", "[::1]:7471", "localhost:http"
	cfg.RESP = &RESPConfig{Listen: "127.0.0.1:6379"}
	cfg.Peers = []string{"10.0.0.2:7470", "node-b.example:7470/10.0.0.9:7471", " [fe80::1]:7470 "}
	cfg.Cluster.Cluster = ""
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
}

// When Start fails after opening the devices (the RESP port is taken), everything it opened
// is closed again: the device can be served at once.
func TestStartFailingClosesWhatItOpened(t *testing.T) {
	dev := formatFile(t, t.TempDir(), "a.img")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := startConfig(dev)
	cfg.RESP = &RESPConfig{Listen: busy.Addr().String()}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "RESP listener") {
		t.Fatalf("RESP port taken: %v", err)
	}
	n, err := Start(context.Background(), startConfig(dev))
	if err != nil {
		t.Fatalf("the device stayed held: %v", err)
	}
	n.Close()
}

// A node joins a cluster only when told to (a name, or seeds), and says which once joined.
func TestStartJoinsOnlyWhenTold(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{}, false},
		{Config{Cluster: cluster.Config{Cluster: "none"}}, false},
		{Config{Cluster: cluster.Config{Cluster: "none", Seeds: []string{"127.0.0.1:1"}}}, false},
		{Config{Cluster: cluster.Config{Seeds: []string{"127.0.0.1:1"}}}, true},
		{Config{Cluster: cluster.Config{Cluster: "lab"}}, true},
		{Config{Cluster: cluster.Config{Cluster: "lab"}, Peers: []string{"127.0.0.1:1"}}, false},
	} {
		if got := c.cfg.joins(); got != c.want {
			t.Errorf("%+v: joins %v", c.cfg, got)
		}
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	cfg := startConfig(formatFile(t, dir, "a.img"))
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	cfg.Cluster = cluster.Config{Cluster: "lab", BindAddr: "127.0.0.1", RegistryDir: filepath.Join(dir, "reg"), Timing: cluster.TimingFast}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if s := buf.String(); !strings.Contains(s, `msg="joined cluster" cluster=lab members=1 name=t`) {
		t.Fatalf("log %q", s)
	}
}

// On a file, DeallocateAll deallocates the slots a full node's evictions free (holes punched,
// deallocated_slots counted) and the keys stored in their place read back; DeallocateDevices
// (serve's default) and DeallocateNone deallocate nothing on a file. On a block device (a
// loop device, where root may attach one) DeallocateDevices deallocates (BLKDISCARD).
func TestStartDeallocatesEvictedSlots(t *testing.T) {
	for _, tc := range []struct {
		mode   Deallocation
		loop   bool
		deallo bool
	}{
		{DeallocateAll, false, true}, {DeallocateDevices, false, false}, {DeallocateNone, false, false},
		{DeallocateDevices, true, true},
	} {
		mode := tc.mode
		var dev string
		if tc.loop {
			if os.Geteuid() != 0 {
				t.Log("not root: no loop device case")
				continue
			}
			dev = formatLoop(t)
		} else {
			dev = formatFileOf(t, t.TempDir(), "a.img", 16<<20, 16<<10)
		}
		cfg := startConfig(dev)
		cfg.Deallocate = mode
		n, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		total := int(n.Usage().SlotsTotal)
		c := dial(t, n)
		for i := range 2 * total { // the second half evicts the first
			put(t, c, i, 16<<10)
		}
		for i := total + total/2; i < 2*total; i++ { // the newest are stored and read back
			if ch := get(t, c, i); ch.Source == p2ppb.Source_SOURCE_MISS {
				t.Fatalf("deallocate %q: key %d, stored after the evictions, misses", mode, i)
			}
		}
		n.cache.FlushDeallocates()
		st := n.Stats().Counters
		calls := sharded.SumStats(n.cache.StatsByShard()).DeallocateCalls
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("deallocate %q on %s: %d slots, %d evicted, %d deallocated in %d calls", mode, dev, total, st["evicted"], st["deallocated_slots"], calls)
		switch {
		case st["evicted"] < int64(total/2):
			t.Fatalf("deallocate %q: %d evicted of %d puts into %d slots", mode, st["evicted"], 2*total, total)
		case tc.deallo && (st["deallocated_slots"] < st["evicted"] || st["deallocate_errors"] != 0):
			t.Fatalf("deallocate %q on %s: %d slots deallocated (%d errors) after %d evictions", mode, dev, st["deallocated_slots"], st["deallocate_errors"], st["evicted"])
		case tc.deallo && calls*4 > st["evicted"]: // evicting a batch ahead (deallocAhead)
			t.Fatalf("deallocate %q on %s: %d deallocate calls for %d evictions; a full node evicting only what each put needs waits for one per put", mode, dev, calls, st["evicted"])
		case !tc.deallo && st["deallocated_slots"] != 0:
			t.Fatalf("deallocate %q: %d slots of a file deallocated", mode, st["deallocated_slots"])
		}
	}
}

// Which devices each Deallocation deallocates on (a block device whose queue takes no
// discards, Info.Deallocate false, only with all), and what ParseDeallocation takes.
func TestDeallocationKinds(t *testing.T) {
	infos := []blockdev.Info{{Kind: blockdev.KindFile, Deallocate: true}, {Kind: blockdev.KindBlock, Deallocate: true},
		{Kind: blockdev.KindBlock}, {Kind: blockdev.KindNVMeChar, Deallocate: true}, {Kind: blockdev.KindEmulated, Deallocate: true},
		{Kind: blockdev.KindMemory, Deallocate: true}}
	for _, c := range []struct {
		spell string
		want  []bool // per device above
	}{
		{"devices", []bool{false, true, false, true, true, true}},
		{"all", []bool{true, true, true, true, true, true}},
		{"none", []bool{false, false, false, false, false, false}},
		{"", []bool{false, false, false, false, false, false}},
	} {
		d, err := ParseDeallocation(c.spell)
		if err != nil {
			t.Fatalf("%q: %v", c.spell, err)
		}
		for i, info := range infos {
			if d.On(info) != c.want[i] {
				t.Errorf("deallocate %q on %+v: %v, want %v", c.spell, info, d.On(info), c.want[i])
			}
		}
	}
	for _, bad := range []string{"true", "false", "files", "Devices"} {
		if _, err := ParseDeallocation(bad); err == nil {
			t.Errorf("ParseDeallocation(%q) took it", bad)
		}
	}
	cfg := startConfig("x")
	cfg.Deallocate = "yes"
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "devices, all or none") {
		t.Fatalf("Start with deallocate %q: %v", cfg.Deallocate, err)
	}
}

// INFO's maxmemory_policy for each eviction: valkey's names where they mean the same.
func TestMaxmemoryPolicy(t *testing.T) {
	for e, want := range map[Eviction]string{EvictNone: "noeviction", EvictLRU: "allkeys-lru", EvictFIFO: "rbctl-fifo", EvictRegion: "rbctl-region"} {
		if got := maxmemoryPolicy(e); got != want {
			t.Errorf("eviction %q: maxmemory_policy %q, want %q", e, got, want)
		}
	}
}

// TestStartIOEngines: a node names its devices' I/O engines (INFO's rbctl_io_engine, the
// "recovering cache" log line): serve's options open its regular files with native AIO.
func TestStartIOEngines(t *testing.T) {
	dir := t.TempDir()
	a, b := formatFile(t, dir, "a.img"), formatFile(t, dir, "b.img")
	cfg := startConfig(a, b)
	cfg.Open.Device = devices.Options{IOPath: devices.PathAuto, AutoFile: devices.PathAio, Direct: true, QueueDepth: 32}
	var log bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	n := startT(t, cfg)
	if got := n.IOEngines(); got != "aio" {
		t.Errorf("two files opened with AutoFile aio: IOEngines %q, want aio", got)
	}
	if c := strings.Count(log.String(), "io_engine=aio"); c != 2 {
		t.Errorf("%d log lines name io_engine=aio, want one per device:\n%s", c, log.String())
	}
}
