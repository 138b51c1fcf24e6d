package sharded_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
)

const (
	slotBytes = 16 << 10
	metaBytes = 1 << 20
	devSlots  = 64
)

func testConfig() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = slotBytes
	c.MetaTotalBytes = metaBytes
	c.Periodic = false
	c.StoreWorkers, c.LookupWorkers, c.LoadWorkers = 1, 1, 1
	return c
}

func mems(n int) []*blockdev.Mem {
	out := make([]*blockdev.Mem, n)
	for i := range out {
		out[i] = blockdev.NewMem(metaBytes+devSlots*slotBytes, 0)
	}
	return out
}

func asDevs[T blockdev.Device](ds []T) []blockdev.Device {
	out := make([]blockdev.Device, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}

func key(i int, rank uint32) engine.Key {
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], uint64(i))
	return engine.ObjectKey("shard/model", rank, h[:], "")
}

func payload(i int) []byte {
	p := make([]byte, 100+i%900)
	for j := range p {
		p[j] = byte(i*31 + j)
	}
	return p
}

func format(t *testing.T, devs []blockdev.Device, opts sharded.Config) *sharded.Cache {
	t.Helper()
	c, err := sharded.Format(devs, testConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRouteStableAndBalanced(t *testing.T) {
	const n, keys = 4, 40000
	counts := make([]int, n)
	for i := 0; i < keys; i++ {
		k := key(i, 0)
		s := sharded.ShardOf(sharded.RouteHash, k, n)
		if again := sharded.ShardOf(sharded.RouteHash, engine.RawKey(k.String()), n); again != s {
			t.Fatalf("key %d routed to %d, then %d", i, s, again)
		}
		counts[s]++
	}
	for s, c := range counts {
		if c < keys/n*9/10 || c > keys/n*11/10 {
			t.Errorf("shard %d got %d of %d keys (want within 10%% of %d): %v", s, c, keys, keys/n, counts)
		}
	}
	// Pinned values: the hash route is part of the on-disk contract of a sharded cache.
	got := []int{sharded.ShardOf(sharded.RouteHash, key(1, 0), 4), sharded.ShardOf(sharded.RouteHash, key(2, 0), 4),
		sharded.ShardOf(sharded.RouteHash, key(3, 0), 4), sharded.ShardOf(sharded.RouteHash, key(4, 0), 4)}
	if want := pinnedRoutes; !reflect.DeepEqual(got, want) {
		t.Errorf("hash routes of keys 1..4 over 4 shards = %v, want %v (changing the route breaks existing caches)", got, want)
	}
}

func TestRouteKVRank(t *testing.T) {
	for _, tp := range []int{1, 2, 4, 8} {
		for _, n := range []int{1, 2, 4, 8} {
			for rank := 0; rank < tp; rank++ {
				for i := 0; i < 8; i++ {
					if got := sharded.ShardOf(sharded.RouteKVRank, key(i, uint32(rank)), n); got != rank%n {
						t.Fatalf("TP %d over %d devices: rank %d → shard %d, want %d", tp, n, rank, got, rank%n)
					}
				}
			}
		}
	}
	legacy, err := engine.ParseKey("m@4@3@00ab@half", engine.NamespaceLegacy)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharded.ShardOf(sharded.RouteKVRank, legacy, 2); got != 1 {
		t.Errorf("legacy key of worker 3 over 2 devices → shard %d, want 1", got)
	}
	opaque := engine.RawKey("no-rank-here")
	if got, want := sharded.ShardOf(sharded.RouteKVRank, opaque, 4), sharded.ShardOf(sharded.RouteHash, opaque, 4); got != want {
		t.Errorf("a key without a rank goes by hash: shard %d, want %d", got, want)
	}
	if _, err := sharded.ParseRoute("round-robin"); err == nil {
		t.Error("ParseRoute accepted round-robin")
	}
}

func TestBatchedOpsKeepOrder(t *testing.T) {
	ms := mems(3)
	c := format(t, asDevs(ms), sharded.Config{})
	defer c.Close()
	const n = 60
	keys := make([]engine.Key, n)
	pays := make([][]byte, n)
	for i := range keys {
		keys[i], pays[i] = key(i, 0), payload(i)
	}
	// Every other key first: the second PutMany reports those as already there, not stored.
	var half []int
	for i := 0; i < n; i += 2 {
		half = append(half, i)
	}
	if _, err := c.PutMany(pick(keys, half), pick(pays, half)); err != nil {
		t.Fatal(err)
	}
	res, err := c.PutMany(keys, pays)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range res.Results {
		if !ok {
			t.Fatalf("key %d not stored", i)
		}
	}
	var odd []int
	for i := 1; i < n; i += 2 {
		odd = append(odd, i)
	}
	if !reflect.DeepEqual(res.Stored, odd) {
		t.Fatalf("Stored = %v, want the odd keys %v", res.Stored, odd)
	}
	used := 0
	for s, u := range c.UsageByShard() {
		if u.SlotsUsed == 0 {
			t.Errorf("shard %d holds nothing: routing does not spread", s)
		}
		used += int(u.SlotsUsed)
	}
	if u := c.Usage(); used != n || u.SlotsUsed != n || u.SlotsTotal != 3*devSlots {
		t.Errorf("usage %d used of %d (per shard sum %d), want %d of %d", u.SlotsUsed, u.SlotsTotal, used, n, 3*devSlots)
	}
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, slotBytes)
	}
	ok, err := c.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i][:len(pays[i])], pays[i]) {
			t.Fatalf("key %d: loaded %v, bytes differ or missing", i, ok[i])
		}
	}
	// A miss in the middle ends the prefix there, whichever shard it is on.
	probe := append(append([]engine.Key{}, keys[:10]...), key(1000, 0))
	probe = append(probe, keys[10:20]...)
	if m := c.MetadataPrefix(probe, true); len(m) != 10 {
		t.Fatalf("MetadataPrefix over a miss at 10 returned %d entries", len(m))
	} else {
		for i := range m {
			want, _ := c.Lookup(keys[i])
			if m[i].Offset != want.Offset || m[i].Locks != 1 {
				t.Fatalf("entry %d: offset %d locks %d, want offset %d locked once", i, m[i].Offset, m[i].Locks, want.Offset)
			}
		}
	}
	for i := 10; i < 20; i++ {
		if m, _ := c.Lookup(keys[i]); m.Locks != 0 {
			t.Fatalf("key %d past the prefix kept a lock", i)
		}
	}
	c.UnlockMany(keys[:10])
	hits := c.ExistsMany([]engine.Key{keys[5], key(2000, 0), keys[7]}, false)
	if !reflect.DeepEqual(hits, []bool{true, false, true}) {
		t.Fatalf("ExistsMany = %v", hits)
	}
	del := c.DeleteMany([]engine.Key{keys[3], key(3000, 0), keys[4]}, false)
	if !reflect.DeepEqual(del, []bool{true, false, true}) {
		t.Fatalf("DeleteMany = %v", del)
	}
	if st := c.Stats(); st.Puts != n || st.Deletes != 2 {
		t.Errorf("summed stats: %d puts, %d deletes; want %d, 2", st.Puts, st.Deletes, n)
	}
}

func pick[T any](all []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = all[i]
	}
	return out
}

// An I/O error on one shard fails only that shard's keys, names the shard, and the shard's
// engine serves again once its device answers.
func TestShardErrorIsolationAndRecovery(t *testing.T) {
	ms := mems(3)
	var failing atomic.Bool
	fd := faultdev.New(ms[1], 1, faultdev.Rule{Name: "window", Class: faultdev.ClassRead | faultdev.ClassWrite,
		Pred: func(faultdev.OpInfo) bool { return failing.Load() }, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
	devs := []blockdev.Device{ms[0], fd, ms[2]}
	var events [3]atomic.Int64
	var errEvents [3]atomic.Int64
	c := format(t, devs, sharded.Config{Observe: func(ev sharded.Event) {
		events[ev.Shard].Add(1)
		if ev.Err != nil {
			errEvents[ev.Shard].Add(1)
		}
	}})
	defer c.Close()
	const n = 48
	keys := make([]engine.Key, n)
	pays := make([][]byte, n)
	for i := range keys {
		keys[i], pays[i] = key(i, 0), payload(i)
	}
	stored := func(from, to int) (engine.PutResult, error) { return c.PutMany(keys[from:to], pays[from:to]) }
	if _, err := stored(0, n/2); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	res, err := stored(n/2, n)
	var se *sharded.ShardError
	if !errors.As(err, &se) || se.Shard != 1 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("put during the window: %v, want a *ShardError for shard 1 wrapping EIO", err)
	}
	if got := sharded.FailedShards(err); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("FailedShards = %v", got)
	}
	for j, ok := range res.Results {
		if want := c.ShardOf(keys[n/2+j]) != 1; ok != want {
			t.Fatalf("key %d on shard %d stored=%v during shard 1's failure", n/2+j, c.ShardOf(keys[n/2+j]), ok)
		}
	}
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, slotBytes)
	}
	ok, err := c.LoadManyInto(keys[:n/2], bufs[:n/2])
	if !reflect.DeepEqual(sharded.FailedShards(err), []int{1}) {
		t.Fatalf("load during the window: %v, want shard 1's error only", err)
	}
	for i := 0; i < n/2; i++ {
		if want := c.ShardOf(keys[i]) != 1; ok[i] != want {
			t.Fatalf("key %d on shard %d loaded=%v during shard 1's failure", i, c.ShardOf(keys[i]), ok[i])
		}
	}
	if errEvents[0].Load() != 0 || errEvents[2].Load() != 0 || errEvents[1].Load() == 0 {
		t.Fatalf("observed error events per shard %d %d %d, want only shard 1's", errEvents[0].Load(), errEvents[1].Load(), errEvents[2].Load())
	}
	// The device answers again: the same engine stores and loads everything.
	failing.Store(false)
	if _, err := stored(n/2, n); err != nil {
		t.Fatalf("put after the window: %v", err)
	}
	ok, err = c.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i][:len(pays[i])], pays[i]) {
			t.Fatalf("key %d (shard %d) not served after the device came back", i, c.ShardOf(keys[i]))
		}
	}
	if u := c.UsageByShard()[1]; u.SlotsInflight != 0 || u.SlotsUsed+u.SlotsFree != u.NextSlot {
		t.Fatalf("shard 1 leaked slots: %+v", u)
	}
	if err := c.CheckpointNow(); err != nil {
		t.Fatalf("checkpoint after the window: %v", err)
	}
}

func TestOpenRecoversEveryShard(t *testing.T) {
	ms := mems(4)
	c := format(t, asDevs(ms), sharded.Config{Route: sharded.RouteKVRank})
	const n = 40
	keys := make([]engine.Key, n)
	pays := make([][]byte, n)
	for i := range keys {
		keys[i], pays[i] = key(i, uint32(i%4)), payload(i)
	}
	if _, err := c.PutMany(keys, pays); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	extra := key(999, 2)
	if _, err := c.PutMany([]engine.Key{extra}, [][]byte{payload(999)}); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseNoCheckpoint(); err != nil { // a crash after the checkpoint
		t.Fatal(err)
	}
	re := make([]blockdev.Device, len(ms))
	for i, m := range ms {
		re[i] = m.Reopen()
	}
	c2, err := sharded.Open(re, testConfig(), sharded.Config{Route: sharded.RouteKVRank})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rec := c2.Recovery()
	if len(rec) != 4 {
		t.Fatalf("%d recovery reports, want 4", len(rec))
	}
	for s, r := range rec {
		if r.Kept != n/4 || r.Container < 0 {
			t.Errorf("shard %d recovered %d entries from container %d, want %d", s, r.Kept, r.Container, n/4)
		}
	}
	hits := c2.ExistsMany(append(keys, extra), false)
	for i, h := range hits[:n] {
		if !h {
			t.Fatalf("key %d lost", i)
		}
	}
	if hits[n] {
		t.Error("a put after the last checkpoint survived a crash")
	}
}

func TestOpenRefusesAnotherOrder(t *testing.T) {
	ms := mems(2)
	c := format(t, asDevs(ms), sharded.Config{})
	keys := make([]engine.Key, 20)
	pays := make([][]byte, 20)
	for i := range keys {
		keys[i], pays[i] = key(i, 0), payload(i)
	}
	if _, err := c.PutMany(keys, pays); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := sharded.Open([]blockdev.Device{ms[1].Reopen(), ms[0].Reopen()}, testConfig(), sharded.Config{})
	if !errors.Is(err, sharded.ErrMisrouted) {
		t.Fatalf("open in swapped order: %v, want ErrMisrouted", err)
	}
	c2, err := sharded.Open([]blockdev.Device{ms[0].Reopen(), ms[1].Reopen()}, testConfig(), sharded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
}

func TestFormatFailureNamesShard(t *testing.T) {
	small := blockdev.NewMem(metaBytes/2, 0)
	devs := []blockdev.Device{blockdev.NewMem(metaBytes+devSlots*slotBytes, 0), small}
	_, err := sharded.Format(devs, testConfig(), sharded.Config{})
	var se *sharded.ShardError
	if !errors.As(err, &se) || se.Shard != 1 {
		t.Fatalf("format over a too-small second device: %v, want shard 1's error", err)
	}
}

// SumStats must add every counter engine.Stats gains: a new int64 field left out is caught.
func TestSumStatsCoversEveryCounter(t *testing.T) {
	var one engine.Stats
	v := reflect.ValueOf(&one).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Int64 {
			f.SetInt(1)
		}
	}
	sum := reflect.ValueOf(sharded.SumStats([]engine.Stats{one, one}))
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Int64 || f.Type != reflect.TypeOf(int64(0)) {
			continue
		}
		if got := sum.Field(i).Int(); got != 2 {
			t.Errorf("SumStats: %s = %d over two shards with 1 each, want 2", f.Name, got)
		}
	}
}

var pinnedRoutes = []int{0, 0, 0, 1}

func TestRankOfEveryKeyShape(t *testing.T) {
	five := engine.RawKey("m@0x00000003@1f@00ab@salt") // newer object-group keys
	if r, ok := sharded.Rank(five); !ok || r != 3 {
		t.Errorf("five-field object key: rank %d %v, want 3", r, ok)
	}
	if r, ok := sharded.Rank(key(1, 6)); !ok || r != 6 {
		t.Errorf("object key: rank %d %v, want 6", r, ok)
	}
	if _, ok := sharded.Rank(engine.RawKey("a@b")); ok {
		t.Error("a two-field key has a rank")
	}
}

// RegisterMemory reaches every shard: loads into the registered pool are fixed reads on
// each device; on devices without registered buffers every shard's refusal is reported.
func TestRegisterMemoryOnEveryShard(t *testing.T) {
	var devs []*blockdev.UringDevice
	for i := range 2 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("shard%d.img", i))
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, metaBytes+devSlots*slotBytes); err != nil {
			t.Fatal(err)
		}
		d, err := blockdev.OpenUring(path, blockdev.UringOptions{QueueDepth: 8, Rings: 1})
		if err != nil {
			t.Skipf("io_uring O_DIRECT file: %v", err)
		}
		devs = append(devs, d)
	}
	c := format(t, asDevs(devs), sharded.Config{})
	const n = 16
	pool, err := blockdev.Alloc(n * slotBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		blockdev.Free(pool)
	}()
	keys := make([]engine.Key, n)
	pays := make([][]byte, n)
	bufs := make([][]byte, n)
	for i := range keys {
		keys[i], pays[i], bufs[i] = key(i, 0), payload(i), pool[i*slotBytes:(i+1)*slotBytes]
	}
	if _, err := c.PutMany(keys, pays); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterMemory([][]byte{pool}); err != nil {
		t.Fatal(err)
	}
	var before [2]blockdev.UringStats
	for i, d := range devs {
		before[i] = d.Stats()
	}
	ok, err := c.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i][:len(pays[i])], pays[i]) {
			t.Fatalf("key %d: ok=%v", i, ok[i])
		}
	}
	for i, d := range devs {
		s := d.Stats()
		if fixed, plain := s.FixedOps-before[i].FixedOps, s.PlainOps-before[i].PlainOps; fixed == 0 || plain != 0 {
			t.Errorf("device %d: %d fixed, %d plain reads; want only fixed", i, fixed, plain)
		}
	}
	if got := c.Stats().RegisteredMemory; got != 2*int64(len(pool)) {
		t.Errorf("RegisteredMemory over 2 shards = %d, want %d", got, 2*len(pool))
	}

	m := format(t, asDevs(mems(2)), sharded.Config{})
	defer m.Close()
	err = m.RegisterMemory([][]byte{pool})
	var se *sharded.ShardError
	if !errors.Is(err, blockdev.ErrNotSupported) || !errors.As(err, &se) {
		t.Fatalf("RegisterMemory on memory devices: %v, want a ShardError wrapping ErrNotSupported", err)
	}
}

// per_tp_device_paths {"0": c.img, "2": d.img} as LMCache routes it: worker 2's keys on
// d.img (shard 1), worker 0's on c.img, and worker 1, which has no device, is an error (it
// went to shard 1 by rank mod 2 before). Reopened with the same ranks, nothing is misrouted.
func TestRankMapRoutesLikePerTPDevicePaths(t *testing.T) {
	devs := mems(2)
	c := format(t, asDevs(devs), sharded.Config{Route: sharded.RouteKVRank, Ranks: []uint64{0, 2}})
	keys := []engine.Key{key(1, 0), key(2, 2), key(3, 1), key(4, 2), key(5, 0)}
	data := [][]byte{payload(1), payload(2), payload(3), payload(4), payload(5)}
	res, err := c.PutMany(keys, data)
	if !errors.Is(err, sharded.ErrNoShard) {
		t.Fatalf("put of worker 1's key: %v, want ErrNoShard", err)
	}
	if want := []bool{true, true, false, true, true}; !reflect.DeepEqual(res.Results, want) {
		t.Fatalf("results %v, want %v", res.Results, want)
	}
	for i, want := range []int{0, 1, -1, 1, 0} {
		if got := c.ShardOf(keys[i]); got != want {
			t.Errorf("key %q → shard %d, want %d", keys[i].String(), got, want)
		}
	}
	if m, ok := c.Shard(1).Lookup(keys[1]); !ok || m.Size != len(data[1]) {
		t.Errorf("worker 2's key is not on d.img (shard 1)")
	}
	legacy, err := engine.ParseKey("m@3@2@00ab@half", engine.NamespaceLegacy)
	if err != nil || c.ShardOf(legacy) != 1 {
		t.Errorf("legacy key of worker 2 → shard %d %v, want 1", c.ShardOf(legacy), err)
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, len(data[i]))
	}
	ok, err := c.LoadManyInto(keys, bufs)
	if !errors.Is(err, sharded.ErrNoShard) || !reflect.DeepEqual(ok, []bool{true, true, false, true, true}) || !bytes.Equal(bufs[1], data[1]) {
		t.Fatalf("load: %v %v", ok, err)
	}
	if got := c.ExistsMany(keys, false); !reflect.DeepEqual(got, []bool{true, true, false, true, true}) {
		t.Errorf("exists %v", got)
	}
	if got := c.MetadataPrefix(keys, false); len(got) != 2 {
		t.Errorf("metadata prefix of %d keys, want 2 (worker 1's key ends it)", len(got))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	re := func() []blockdev.Device { return []blockdev.Device{devs[0].Reopen(), devs[1].Reopen()} }
	c2, err := sharded.Open(re(), testConfig(), sharded.Config{Route: sharded.RouteKVRank, Ranks: []uint64{0, 2}})
	if err != nil {
		t.Fatalf("reopen with the same ranks: %v", err)
	}
	c2.CloseNoCheckpoint()
	if _, err := sharded.Open(re(), testConfig(), sharded.Config{Route: sharded.RouteKVRank, Ranks: []uint64{0, 1}}); !errors.Is(err, sharded.ErrMisrouted) {
		t.Errorf("reopen with rank 1 for d.img: %v, want ErrMisrouted", err)
	}
	if _, err := sharded.Open(re(), testConfig(), sharded.Config{Route: sharded.RouteKVRank, Ranks: []uint64{0, 0}}); !errors.Is(err, engine.ErrConfig) {
		t.Errorf("a rank served twice: %v", err)
	}
	if _, err := sharded.Open(re(), testConfig(), sharded.Config{Route: sharded.RouteHash, Ranks: []uint64{0, 2}}); !errors.Is(err, engine.ErrConfig) {
		t.Errorf("ranks without kv-rank routing: %v", err)
	}
}
