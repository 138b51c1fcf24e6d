package node

// The data-path tests that ran `rbctl serve` in a child process before issue 36: each
// starts its nodes here with Start, with the Config the flags gave (serve's defaults:
// Eviction LRU, Admission all), and asserts what the binary's test did. What only the
// binary shows (flags, exit codes, signals, its log lines) stays in cmd/rbctl/internal/cli.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// formatDevs formats paths as one cache (rbctl format --create size --slot-bytes slot).
func formatDevs(t testing.TB, size, slot int64, paths ...string) {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = slot, 0
	opts := make([]cache.FormatOptions, len(paths))
	for i, p := range paths {
		opts[i] = cache.FormatOptions{Path: p, Create: size, Config: cfg,
			Open: func() (blockdev.Device, error) { return devices.Open(p, devices.DefaultOptions()) }}
	}
	if _, err := cache.FormatAll(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
}

// startT starts cfg and closes the node when the test ends.
func startT(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// statsOf is the node's Stats over gRPC, as rbctl remote stats --json shows them.
func statsOf(t testing.TB, c *client.Client) map[string]int64 {
	t.Helper()
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Counters
}

// redisCli returns a function that runs redis-cli against addr with stdin and args (a
// node Start returned listens already); it skips a short run or a machine without redis-cli.
func redisCli(t *testing.T) func(addr string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs redis-cli")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("needs redis-cli (Debian redis-tools; make setup installs it)")
	}
	return func(addr string, stdin []byte, args ...string) (string, error) {
		h, p, _ := net.SplitHostPort(addr)
		cmd := exec.Command(cli, append([]string{"-h", h, "-p", p}, args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// Two nodes with RESP; redis-cli (a client no one here wrote) SETs a binary chunk in
// LMCache's native key spelling on a and GETs it byte-exact from b, which fetches it from a
// over P2P; a value over a slot's payload is answered OK, dropped and counted
// (resp_set_dropped/too_large); after the nodes close, a's device holds the chunk under the
// native key (rbctl get --native-key). (Was cli's TestServeRESPWithRedisCli.)
func TestStartRESPWithRedisCli(t *testing.T) {
	redis := redisCli(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	formatDevs(t, 16<<20, 256<<10, a)
	formatDevs(t, 16<<20, 256<<10, b)
	ca := startConfig(a)
	ca.Name, ca.RESP = "a", &RESPConfig{Listen: "127.0.0.1:0"}
	na := startT(t, ca)
	cb := startConfig(b)
	cb.Name, cb.Peers, cb.Cluster, cb.RESP = "b", []string{na.Peer().Control}, cluster.Config{}, &RESPConfig{Listen: "127.0.0.1:0"}
	nb := startT(t, cb)
	ra, rb := na.RESPAddr(), nb.RESPAddr()
	key := "my/model@00000000@0@00ff@tenant"
	val := make([]byte, 200<<10)
	rand.Read(val)
	val[0], val[1], val[2] = 0, '\r', '\n' // binary, with what RESP frames with
	if out, err := redis(ra, val, "-x", "SET", key); err != nil || strings.TrimSpace(out) != "OK" {
		t.Fatalf("SET: %v %q", err, out)
	}
	if out, _ := redis(ra, nil, "EXISTS", key, "my/model@00000000@0@01ff@tenant"); strings.TrimSpace(out) != "1" {
		t.Errorf("EXISTS of one stored, one absent: %q", out)
	}
	// GET on b: a miss there, fetched from a. redis-cli prints the raw bulk plus a newline.
	got, err := redis(rb, nil, "--raw", "GET", key)
	if err != nil || got != string(val)+"\n" {
		t.Fatalf("GET on b: %v, %d bytes, byte-exact %v", err, len(got), got == string(val)+"\n")
	}
	if st := statsOf(t, dial(t, nb)); st["peer_hits"] != 1 || st["replicas_stored"] != 1 {
		t.Errorf("b's stats after the RESP GET: %v", st)
	}
	// INFO names the node's eviction as valkey would (a's LRU), not a fixed noeviction.
	if out, _ := redis(ra, nil, "INFO", "memory"); !strings.Contains(out, "maxmemory_policy:allkeys-lru") || !strings.Contains(out, "rbctl_eviction:lru") || strings.Count(out, "maxmemory_policy") != 1 {
		t.Errorf("INFO memory of an LRU node:\n%s", out)
	}
	// INFO names the engine the node's device was opened with, as the start-up log does.
	if out, _ := redis(ra, nil, "INFO", "memory"); na.IOEngines() == "" || !strings.Contains(out, "rbctl_io_engine:"+na.IOEngines()+"\r\n") && !strings.Contains(out, "rbctl_io_engine:"+na.IOEngines()+"\n") {
		t.Errorf("INFO memory: no rbctl_io_engine:%s in\n%s", na.IOEngines(), out)
	}
	// Over a slot's payload (256 KiB - 4 KiB): OK, dropped, counted.
	big := make([]byte, 253<<10)
	if out, _ := redis(ra, big, "-x", "SET", "my/model@00000000@0@02ff"); strings.TrimSpace(out) != "OK" {
		t.Errorf("SET over a slot: %q", out)
	}
	if out, _ := redis(ra, nil, "DBSIZE"); strings.TrimSpace(out) != "1" {
		t.Errorf("DBSIZE after the drop: %q", out)
	}
	if st := statsOf(t, dial(t, na)); st["resp_set_dropped/too_large"] != 1 {
		t.Errorf("a's stats after the dropped SET: %v", st)
	}
	// Any other key: the generic namespace, read back as stored.
	if out, _ := redis(ra, nil, "SET", "plain-redis-key", "v"); strings.TrimSpace(out) != "OK" {
		t.Errorf("SET of a non-LMCache key: %q", out)
	}
	if out, _ := redis(ra, nil, "GET", "plain-redis-key"); strings.TrimSpace(out) != "v" {
		t.Errorf("GET of a non-LMCache key: %q", out)
	}
	for _, n := range []*Node{na, nb} {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	e, err := cache.Open(a, cache.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	k, err := engine.FromNative(key)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.LoadMany([]engine.Key{k}, func(n int) []byte { return make([]byte, n) })
	if err != nil || len(vs) != 1 || !bytes.Equal(vs[0], val) {
		t.Errorf("a's device after close, --native-key %s: %v, %d values", key, err, len(vs))
	}
}

// Admission second-hit declines a key's first write and stores its second, over RESP (SET
// answers OK both times; the GET between misses) and over gRPC (the put says it was
// declined); INFO and Stats count the declines. (Was cli's TestServeAdmission; serve's
// refusal of --admission prefix-depth stays there.)
func TestStartAdmission(t *testing.T) {
	redis := redisCli(t)
	dir := t.TempDir()
	dev := filepath.Join(dir, "a.img")
	formatDevs(t, 16<<20, 64<<10, dev)
	cfg := startConfig(dev)
	cfg.RESP, cfg.Admission = &RESPConfig{Listen: "127.0.0.1:0"}, "second-hit"
	n := startT(t, cfg)
	ra := n.RESPAddr()
	key := "my/model@00000000@0@00ff@tenant"
	for i, want := range []string{"", "v1"} {
		if out, err := redis(ra, nil, "SET", key, "v1"); err != nil || strings.TrimSpace(out) != "OK" {
			t.Fatalf("SET %d: %v %q", i+1, err, out)
		}
		if out, _ := redis(ra, nil, "GET", key); strings.TrimSpace(out) != want {
			t.Errorf("GET after SET %d: %q, want %q", i+1, out, want)
		}
	}
	if out, _ := redis(ra, nil, "INFO"); !strings.Contains(out, "rbctl_admission_declined:1") {
		t.Errorf("INFO does not count one declined write:\n%s", out)
	}
	c := dial(t, n)
	for i, declined := range []bool{true, false} {
		err := c.Store(context.Background(), client.Key("m", 0, []byte{0x01}, ""), []byte("value"))
		if errors.Is(err, client.ErrDeclined) != declined || (!declined && err != nil) || (declined && !strings.Contains(err.Error(), "declined")) {
			t.Errorf("put %d: %v, want declined %v", i+1, err, declined)
		}
	}
	if st := statsOf(t, c); st["admission_declined"] != 2 || st["puts"] != 2 {
		t.Errorf("stats: %v", st)
	}
}

// A node with tokens (AuthFile) and RESP: redis-cli gets NOAUTH before AUTH and NOPERM for
// B's key with A's token; a wrong RESP password counts in auth_failed and resp_auth_failed,
// in Stats and INFO. (Was the RESP part of cli's TestServeAuthRemoteAndRESP.)
func TestStartAuthRESP(t *testing.T) {
	redis := redisCli(t)
	dir := t.TempDir()
	dev := filepath.Join(dir, "a.img")
	formatDevs(t, 16<<20, 64<<10, dev)
	const secA, secB, secOps = "tenant-a-secret-0123456789", "tenant-b-secret-0123456789", "admin-secret-0123456789ab"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("a "+secA+" rights=read,write,delete salts=tenantA\nb "+secB+" rights=read,write,delete salts=tenantB\nops "+secOps+" rights=admin\n"), 0o600)
	cfg := startConfig(dev)
	cfg.AuthFile, cfg.RESP = tokens, &RESPConfig{Listen: "127.0.0.1:0"}
	n := startT(t, cfg)
	ra := n.RESPAddr()
	cli := func(args ...string) string {
		out, _ := redis(ra, nil, append([]string{"--no-auth-warning"}, args...)...)
		return strings.TrimSpace(out)
	}
	key := "m@00000000@0@00ff@tenantB" // a tenant B key in LMCache's native spelling
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", key}, "NOAUTH Authentication required."},
		{[]string{"-a", secB, "SET", key, "B's value"}, "OK"},
		{[]string{"-a", secA, "GET", key}, `NOPERM token a has no read right on cache_salt "tenantB"`},
		{[]string{"-a", secA, "DEL", key}, `NOPERM token a has no delete right on cache_salt "tenantB"`},
		{[]string{"-a", secA, "SET", key, "FORGED by A"}, `NOPERM token a has no write right on cache_salt "tenantB"`},
		{[]string{"-a", secB, "GET", key}, "B's value"},
	} {
		if got := cli(c.args...); got != c.want {
			t.Errorf("redis-cli %v: %q, want %q", c.args[len(c.args)-2:], got, c.want)
		}
	}
	ops, err := client.Dial(n.Peer().Control, 10*time.Second, client.WithToken(secOps))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	authFailed := func() (int64, int64) {
		st := statsOf(t, ops)
		return st["auth_failed"], st["resp_auth_failed"]
	}
	all0, resp0 := authFailed()
	cli("-a", "not-a-token-0123456789", "PING")
	if all, rf := authFailed(); all != all0+1 || rf != resp0+1 {
		t.Errorf("after a wrong RESP password: auth_failed %d -> %d, resp_auth_failed %d -> %d", all0, all, resp0, rf)
	}
	if info := cli("-a", secOps, "INFO"); !strings.Contains(info, "rbctl_resp_auth_failed:1") || !strings.Contains(info, "rbctl_auth_failed:") {
		t.Errorf("INFO:\n%s", info)
	}
}

// memberNames lists the cluster members a node's Stats show (member/NAME/state), sorted.
func memberNames(t testing.TB, c *client.Client) string {
	var names []string
	for k := range statsOf(t, c) {
		if n, ok := strings.CutSuffix(k, "/state"); ok {
			names = append(names, strings.TrimPrefix(n, "member/"))
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// gossipConfig is serve --cluster name --node-name node on dev, nodes of the machine
// finding each other through the registry directory reg.
func gossipConfig(dev, name, node, reg string) Config {
	cfg := startConfig(dev)
	cfg.Name = ""
	cfg.Cluster = cluster.Config{Cluster: name, Name: node, BindAddr: "127.0.0.1", RegistryDir: reg}
	return cfg
}

// Two nodes with the same GossipKeyFile find each other through the machine's registry; a
// third without it stays alone and is not listed by them. (Was cli's TestServeGossipKeyFile.)
func TestStartGossipKeyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("gossip with LAN timing")
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "gossip.keys")
	os.WriteFile(keys, []byte("# primary\nq83vEjHKIv7Vv3fOD8eX3rZ4n7qW0cFz3jV0ZcGUl1w=\n"), 0o600)
	var cs []*client.Client
	for i, keyFile := range []string{keys, keys, ""} {
		dev := filepath.Join(dir, string(rune('a'+i))+".img")
		formatDevs(t, 16<<20, 64<<10, dev)
		cfg := gossipConfig(dev, "keyed", "n"+string(rune('0'+i)), filepath.Join(dir, "reg"))
		cfg.GossipKeyFile = keyFile
		cs = append(cs, dial(t, startT(t, cfg)))
	}
	for end := time.Now().Add(30 * time.Second); memberNames(t, cs[0]) != "n1" || memberNames(t, cs[1]) != "n0"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("keyed nodes: n0 sees %q, n1 sees %q; want each other", memberNames(t, cs[0]), memberNames(t, cs[1]))
		}
	}
	time.Sleep(2 * time.Second) // the registry has shown n2 to the others by now
	if m0, m2 := memberNames(t, cs[0]), memberNames(t, cs[2]); m0 != "n1" || m2 != "" {
		t.Fatalf("the node without the key: n0 sees %q, n2 sees %q", m0, m2)
	}
}

// Two nodes of cluster lab with no Peers join through the registry directory, learn each
// other's key digests, and a get on b of a chunk put on a is a peer hit. (Was cli's
// TestServeNodesFindEachOther.)
func TestStartNodesFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("gossip with LAN timing")
	}
	dir := t.TempDir()
	var cs []*client.Client
	for _, name := range []string{"a", "b"} {
		dev := filepath.Join(dir, name+".img")
		formatDevs(t, 16<<20, 64<<10, dev)
		cs = append(cs, dial(t, startT(t, gossipConfig(dev, "lab", name, filepath.Join(dir, "reg")))))
	}
	key := client.Key("m", 0, []byte{0x0a, 0x0b}, "t")
	if err := cs[0].Store(context.Background(), key, []byte("payload\n")); err != nil {
		t.Fatalf("put: %v", err)
	}
	// Membership and the digest travel by gossip: poll (a miss is retried).
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		ch, err := cs[1].Get(context.Background(), key, false)
		if err != nil {
			t.Fatalf("get on b: %v", err)
		}
		if len(ch.Payload) > 0 {
			if string(ch.Payload) != "payload\n" {
				t.Fatalf("get on b: %q", ch.Payload)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("get on b: still a miss after 40s")
		}
	}
	if st := statsOf(t, cs[1]); st["peer_hits"] != 1 {
		t.Fatalf("stats on b: %v", st)
	}
}

// Two devices formatted together serve as one cache, a row per device in the stats table
// (rbctl remote stats). (Was cli's TestServeTwoDevices; serve's refusal of one shard alone,
// or of the shards out of order, stays there.)
func TestStartTwoDevices(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	formatDevs(t, 16<<20, 16<<10, a, b)
	c := dial(t, startT(t, startConfig(a, b)))
	for i := range 100 {
		if err := c.Store(context.Background(), client.Key("m", 0, []byte(fmt.Sprintf("crash-%06d", i)), "t"),
			bytes.Repeat([]byte(fmt.Sprintf("%06d.", i)), 100+i%50)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := client.WriteStats(&table, s); err != nil || !strings.Contains(table.String(), "device") {
		t.Fatalf("stats table: %v\n%s", err, table.String())
	}
	u0, u1 := s.Counters["dev0_slots_used"], s.Counters["dev1_slots_used"]
	if s.Counters["devices"] != 2 || u0+u1 != 100 || u0 == 0 || u1 == 0 {
		t.Fatalf("counters %v", s.Counters)
	}
	t.Logf("stats of a node on a.img b.img after 100 puts:\n%s", table.String())
}

// Issue 35's first case over RESP: a cache of 260 KiB slots, 5 SETs, 12 SETs whose model
// part is 60,000 letters, 5 more SETs, Close, Start again. Before, all 22 were +OK, every
// checkpoint failed silently and the restart kept the first 5. Now every SET is +OK
// (LMCache's client reads 5 bytes), the long ones that do not fit are dropped and counted
// (resp_set_dropped/index_room), INFO stays healthy, the final checkpoint succeeds, and every
// kept key is there after the restart. (Was cli's TestServeRESPLongKeysLoseNothing.)
func TestStartRESPLongKeysLoseNothing(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "long.img")
	formatDevs(t, 64<<20, 260<<10, dev)
	var log syncBuf
	cfg := startConfig(dev)
	cfg.RESP, cfg.CheckpointInterval = &RESPConfig{Listen: "127.0.0.1:0"}, 200*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	n := startT(t, cfg)
	addr := n.RESPAddr()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &lmcClient{t: t, c: conn, br: bufio.NewReader(conn)}
	key := func(model string, i int) string { return fmt.Sprintf("%s@%08x@0@%08x@tenant%d", model, 0, i, i%2) }
	var keys []string
	for i := 0; i < 22; i++ {
		model := "org/model"
		if i >= 5 && i < 17 {
			model = strings.Repeat(string(rune('a'+i)), 60000)
		}
		k := key(model, i)
		keys = append(keys, k)
		l.set(k, []byte(fmt.Sprintf("value-%d", i)))
	}
	if t.Failed() {
		t.FailNow()
	}
	info := bulkReply(t, conn, cmd("INFO"))
	dropped := 0
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "rbctl_resp_set_dropped_index_room:"); ok {
			dropped, _ = strconv.Atoi(v)
		}
	}
	if dropped == 0 || !strings.Contains(info, "rbctl_healthy:1") {
		t.Fatalf("INFO: index_room drops %d, want > 0 and healthy:\n%s", dropped, info)
	}
	conn.Close()
	if err := n.Close(); err != nil || strings.Contains(log.String(), "final checkpoint") {
		t.Fatalf("final checkpoint failed: %v\n%s", err, log.String())
	}
	cfg = startConfig(dev)
	cfg.RESP = &RESPConfig{Listen: addr}
	startT(t, cfg)
	conn, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	l = &lmcClient{t: t, c: conn, br: bufio.NewReader(conn)}
	kept := 0
	for i, k := range keys {
		v := l.get(k)
		long := i >= 5 && i < 17
		switch {
		case v != nil && string(v) != fmt.Sprintf("value-%d", i):
			t.Fatalf("key %d: wrong bytes", i)
		case v == nil && !long:
			t.Fatalf("ordinary key %d lost after Close and restart", i)
		case v != nil:
			kept++
		}
	}
	if want := len(keys) - dropped; kept != want {
		t.Fatalf("%d keys after restart; %d SETs were +OK and %d of them dropped for index room", kept, len(keys), dropped)
	}
	t.Logf("22 SETs +OK, %d long ones dropped (index_room), %d kept and all present after Close and restart", dropped, kept)
}

// Issue 29's keys over P2P: a put on node a of an object-group key, a key with a rank past
// 32 bits and a native-spelled key (each sent encoded, as rbctl remote's --key, --rank
// --group and --native-key send them: flagsets.TestWireKey), and a get through node b, a peer
// fetch from a, nodes naming keys by their encoded string. (Was cli's
// TestServeRemoteEveryKeyShape.)
func TestStartPeerFetchEveryKeyShape(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	formatDevs(t, 16<<20, 64<<10, a)
	formatDevs(t, 16<<20, 64<<10, b)
	na := startT(t, startConfig(a))
	cb := startConfig(b)
	cb.Peers, cb.Cluster = []string{na.Peer().Control + "/" + na.Peer().Data}, cluster.Config{}
	ca, cbc := dial(t, na), dial(t, startT(t, cb))
	native, err := engine.FromNative("my/model@00000001@0@deadbeef@tenant")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"m@0x00000000@1@00ff",
		"m@0x100030803@0@00ff@rag:a",
		engine.ObjectGroupKey("m", 0x100030803, 16, []byte{0x01, 0xff}, "ab").String(),
		native.String(),
	} {
		if err := ca.Store(context.Background(), client.EncodedKey(key), []byte("payload\n")); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		ch, err := cbc.Get(context.Background(), client.EncodedKey(key), false)
		if err != nil || string(ch.Payload) != "payload\n" {
			t.Fatalf("get %s through b: %v, %q", key, err, ch.GetPayload())
		}
	}
}

// Issue 35's second case: a 64 MiB cache file on a 12 MiB tmpfs. Before, 191 puts were
// acknowledged, the final checkpoint failed with ENOSPC and a restart had 0 of them. Now
// format reserves the metadata region, Start warns that the file cannot be filled, puts past
// the filesystem's end are refused, and every acknowledged key survives Close and a
// restart. (Was cli's TestServeSparseFileOnAFullFilesystem; root only.)
func TestStartSparseFileOnAFullFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=12M", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	dev := filepath.Join(mnt, "c.img")
	posix := devices.Options{IOPath: devices.PathPosix, Direct: true, QueueDepth: 32, Exclusive: true, BufferedFallback: true} // --io-engine posix
	ecfg := engine.DefaultConfig()
	ecfg.SlotBytes, ecfg.MetaTotalBytes = 64<<10, 0
	if _, err := cache.FormatAll(context.Background(), []cache.FormatOptions{{Path: dev, Create: 64 << 20, Config: ecfg,
		Open: func() (blockdev.Device, error) { return devices.Open(dev, posix) }}}); err != nil {
		t.Fatal(err)
	}
	var log syncBuf
	cfg := startConfig(dev)
	cfg.Open.Device, cfg.CheckpointInterval = posix, time.Hour
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	n := startT(t, cfg)
	if !strings.Contains(log.String(), "is a sparse file") {
		t.Fatalf("no warning at start about the file its filesystem cannot hold; log:\n%s", log.String())
	}
	c := dial(t, n)
	key := func(i int) *p2ppb.ObjectKey { return client.Key("m", 0, []byte(fmt.Sprintf("crash-%06d", i)), "t") }
	big := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 20000) } // 60 kB
	var acked []int
	refused := 0
	for i := 0; i < 400; i++ {
		if err := c.Store(context.Background(), key(i), big(i)); err != nil {
			refused++
			continue
		}
		acked = append(acked, i)
	}
	if refused == 0 {
		t.Fatalf("400 puts of 60 kB all fit a 12 MiB tmpfs? acknowledged %d", len(acked))
	}
	if err := n.Close(); err != nil || strings.Contains(log.String(), "final checkpoint") {
		t.Fatalf("final checkpoint failed: %v\n%s", err, log.String())
	}
	cfg = startConfig(dev)
	cfg.Open.Device = posix
	c = dial(t, startT(t, cfg))
	for _, i := range acked {
		ch, err := c.Get(context.Background(), key(i), true)
		if err != nil || !bytes.Equal(ch.Payload, big(i)) {
			t.Fatalf("acknowledged key %d not served byte-exact after restart (err %v)", i, err)
		}
	}
	t.Logf("acknowledged %d, refused %d (ENOSPC), all %d present after Close and restart", len(acked), refused, len(acked))
}
