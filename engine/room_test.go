package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
)

// roomConfig is the issue-35 layout: a 64 MiB device of 260 KiB slots with the metadata
// region `rbctl format --meta-bytes auto` gives it.
func roomConfig(format CheckpointFormat) (Config, int64) {
	const size = 64 << 20
	c := DefaultConfig()
	c.SlotBytes = 260 << 10
	c.CheckpointFormat = format
	c.MetaTotalBytes = MetaBytesFor(size, c.SlotBytes, c.BlockAlign, format)
	c.Periodic = false
	c.DevicePath = "/dev/test"
	return c, size
}

func reopen(t *testing.T, m *blockdev.Mem, c Config) *Engine {
	t.Helper()
	m2 := blockdev.NewMem(int64(len(m.Bytes())), 0)
	copy(m2.Bytes(), m.Bytes())
	e, err := Open(m2, c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLongModelNamesCannotLoseOtherTenantsKeys is issue 35's first case: keys whose model
// part is 60,000 letters, between ordinary keys of another tenant. Before the room
// accounting every put was acknowledged and every later checkpoint failed, so a restart
// kept only the first five keys. Now the long keys that do not fit are refused before they
// are written, every acknowledged key is in the checkpoint, and the other tenant can fill
// every remaining slot.
func TestLongModelNamesCannotLoseOtherTenantsKeys(t *testing.T) {
	for _, format := range []CheckpointFormat{CheckpointCompact, CheckpointLMCacheV1} {
		t.Run(string(format), func(t *testing.T) {
			c, size := roomConfig(format)
			m := blockdev.NewMem(size, 0)
			e, err := Format(m, c)
			if err != nil {
				t.Fatal(err)
			}
			var acked []Key
			put := func(k Key) error {
				r, err := e.PutMany([]Key{k}, [][]byte{[]byte(k.String()[:min(len(k.String()), 64)])})
				if len(r.Stored) == 1 {
					acked = append(acked, k)
				}
				return err
			}
			tenantB := func(i int) Key { return ObjectKey("org/model", 0, []byte{byte(i >> 8), byte(i), 0xb}, "tenant-b") }
			for i := 0; i < 5; i++ {
				if err := put(tenantB(i)); err != nil {
					t.Fatal(err)
				}
			}
			long, refused := 0, 0
			for i := 0; i < 12; i++ {
				model := strings.Repeat(string(rune('a'+i)), 60000)
				switch err := put(ObjectKey(model, 0, []byte{byte(i), 0xa}, "tenant-a")); {
				case err == nil:
					long++
				case errors.Is(err, ErrIndexFull):
					refused++
				default:
					t.Fatal(err)
				}
			}
			if refused == 0 {
				t.Fatalf("all 12 long keys were admitted into a %d-byte container", e.layout.PayloadCap)
			}
			// Tenant B fills every slot left: none of its ordinary keys is refused for room.
			for i := 5; ; i++ {
				err := put(tenantB(i))
				if errors.Is(err, ErrIndexFull) {
					t.Fatalf("tenant B's key %d refused for room after tenant A's long keys: %v", i, err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if u := e.Usage(); u.SlotsUsed == u.SlotsTotal {
					break
				}
			}
			if err := e.CheckpointNow(); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			s := e.Stats()
			if s.Room.UsedBytes > s.Room.BudgetBytes || s.Room.Refused != int64(refused) {
				t.Fatalf("room %+v, refused %d", s.Room, refused)
			}
			t.Logf("%s: %d slots, container %d B, long keys kept %d refused %d, checkpoint %d B, room %+v",
				format, e.layout.MaxSlots, e.layout.PayloadCap, long, refused, s.CheckpointBytes, s.Room)
			r := reopen(t, m, c)
			defer r.CloseNoCheckpoint()
			got := r.ExistsMany(acked, false)
			for i, ok := range got {
				if !ok {
					t.Errorf("acknowledged key %d (%.40s…) lost at reopen", i, acked[i].String())
				}
			}
			e.CloseNoCheckpoint()
		})
	}
}

// TestRoomComesBackWhenKeysLeave: deleting the long keys gives their room back, string
// tables included (the interners release strings no key uses).
func TestRoomComesBackWhenKeysLeave(t *testing.T) {
	c, size := roomConfig(CheckpointCompact)
	e, err := Format(blockdev.NewMem(size, 0), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	before := e.Stats().Room
	var keys []Key
	for i := 0; i < 3; i++ {
		k := ObjectKey(strings.Repeat("m", 10000+i), 0, []byte{byte(i)}, fmt.Sprintf("salt-%d", i))
		if r, err := e.PutMany([]Key{k}, [][]byte{{1}}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("put %d: %v", i, err)
		}
		keys = append(keys, k)
	}
	mid := e.Stats().Room
	if mid.UsedBytes < before.UsedBytes+30000 {
		t.Fatalf("three 10,000-byte model names charged %d bytes", mid.UsedBytes-before.UsedBytes)
	}
	e.DeleteMany(keys, true)
	after := e.Stats().Room
	// Released strings stay as 1-byte tombstones until reused.
	if after.UsedBytes > before.UsedBytes+6 || after.SpareBytes < before.SpareBytes-6 {
		t.Fatalf("room not given back: before %+v, after %+v", before, after)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	if b := e.Stats().CheckpointBytes; b > 200 {
		t.Fatalf("an empty index's checkpoint is %d bytes: the released model names are still in it", b)
	}
	// A new string reuses a released id and decodes to itself.
	k := ObjectKey("other/model", 0, []byte{9}, "salt-x")
	if r, err := e.PutMany([]Key{k}, [][]byte{{2}}); err != nil || len(r.Stored) != 1 {
		t.Fatal(err)
	}
	n := 0
	e.Entries(func(got Key, _ EntryMeta) bool {
		n++
		if got.String() != k.String() {
			t.Errorf("entry %q, want %q", got, k)
		}
		return true
	})
	if n != 1 {
		t.Fatalf("%d entries", n)
	}
}

// TestRoomCostsBoundTheCheckpoint: random keys, salts, metadata and deletes in both formats;
// after every step the checkpoint fits (never ErrCheckpointTooBig) and is no larger than
// what the accounting charged, and a reopen serves every acknowledged key.
func TestRoomCostsBoundTheCheckpoint(t *testing.T) {
	for _, format := range []CheckpointFormat{CheckpointCompact, CheckpointLMCacheV1} {
		t.Run(string(format), func(t *testing.T) {
			c := DefaultConfig()
			c.SlotBytes = 16 << 10
			c.MetaTotalBytes = 64 << 10
			c.CheckpointFormat = format
			c.Periodic = false
			const size = 64<<10 + 200*(16<<10)
			m := blockdev.NewMem(size, 0)
			e, err := Format(m, c)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(35, uint64(len(format))))
			live := map[string]Key{}
			hdr := int64(0)
			if format == CheckpointCompact {
				hdr = int64(len(e.encodeCompact(&snapshot{})))
			} else {
				b, _ := e.encodeV1(&snapshot{nextSlot: e.layout.MaxSlots})
				hdr = int64(len(b))
			}
			refusedRoom := 0
			for step := 0; step < 300; step++ {
				if rng.IntN(4) == 0 && len(live) > 0 {
					for s, k := range live {
						e.DeleteMany([]Key{k}, true)
						delete(live, s)
						break
					}
				}
				model := strings.Repeat("x", 1+rng.IntN(3000))
				if rng.IntN(3) > 0 {
					model = "org/model"
				}
				salt := fmt.Sprintf("t%d", rng.IntN(20))
				if rng.IntN(10) == 0 {
					salt = strings.Repeat("\u00e9", rng.IntN(500)) // escaped 6× in v1
				}
				k := ObjectKey(model, uint32(rng.IntN(4)), []byte{byte(step), byte(step >> 8), 7}, salt)
				var meta *ObjMeta
				if rng.IntN(2) == 0 {
					meta = &ObjMeta{Shape: []int{2, 32, 256, 1024}, Dtype: "bfloat16", Fmt: "KV_2LTD", CachedPositions: make([]int, rng.IntN(300))}
				}
				r, err := e.PutManyMeta([]Key{k}, [][]byte{{byte(step)}}, []*ObjMeta{meta})
				switch {
				case len(r.Stored) == 1:
					live[k.String()] = k
				case errors.Is(err, ErrIndexFull):
					refusedRoom++
				case err == nil:
					// full: no slot
				default:
					t.Fatal(err)
				}
				if err := e.CheckpointNow(); err != nil {
					t.Fatalf("step %d: checkpoint: %v", step, err)
				}
				st := e.Stats()
				if st.CheckpointBytes > hdr+st.Room.UsedBytes {
					t.Fatalf("step %d: checkpoint %d B, charged %d + header %d", step, st.CheckpointBytes, st.Room.UsedBytes, hdr)
				}
			}
			if refusedRoom == 0 {
				t.Fatal("the run never met the room limit; make it harder")
			}
			keys := make([]Key, 0, len(live))
			for _, k := range live {
				keys = append(keys, k)
			}
			r := reopen(t, m, c)
			defer r.CloseNoCheckpoint()
			for i, ok := range r.ExistsMany(keys, false) {
				if !ok {
					t.Errorf("acknowledged key %.60s lost", keys[i])
				}
			}
			t.Logf("%s: %d live, %d refused for room", format, len(keys), refusedRoom)
			e.CloseNoCheckpoint()
		})
	}
}

// TestPutsStopWhenCheckpointsFailPastTheWindow: with metadata writes failing, puts go on
// being acknowledged only while the oldest unsaved change is inside the crash window; then
// they are refused until a checkpoint succeeds again.
func TestPutsStopWhenCheckpointsFailPastTheWindow(t *testing.T) {
	c := compatConfig()
	c.Periodic = true
	c.CheckpointInterval = time.Hour // the test drives the checkpoints itself
	c.ForceAfter = time.Minute
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	mem := blockdev.NewMem(c.MetaTotalBytes+64*c.SlotBytes, 0)
	fd := faultdev.New(mem, 1)
	e, err := Format(fd, c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	key := func(i int) Key { return ObjectKey("m", 0, []byte{byte(i), 1}, "") }
	fd.Add(faultdev.Rule{Name: "meta", Class: faultdev.ClassWrite, OffHi: c.MetaTotalBytes, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
	if r, err := e.PutMany([]Key{key(0)}, [][]byte{{1}}); err != nil || len(r.Stored) != 1 {
		t.Fatal(err)
	}
	if err := e.CheckpointNow(); err == nil {
		t.Fatal("checkpoint succeeded with metadata writes failing")
	}
	advance(c.CheckpointInterval + c.ForceAfter - time.Second) // inside the window
	if r, err := e.PutMany([]Key{key(1)}, [][]byte{{1}}); err != nil || len(r.Stored) != 1 {
		t.Fatalf("inside the window: %v", err)
	}
	advance(2 * time.Second)
	r, err := e.PutMany([]Key{key(2)}, [][]byte{{1}})
	if !errors.Is(err, ErrCheckpointFailing) || len(r.Stored) != 0 {
		t.Fatalf("past the window: stored %d, err %v", len(r.Stored), err)
	}
	if s := e.Stats(); s.PutsRefusedCheckpoint != 1 || s.CheckpointFailingFor <= c.CheckpointInterval+c.ForceAfter {
		t.Fatalf("stats: refused %d, failing for %s", s.PutsRefusedCheckpoint, s.CheckpointFailingFor)
	}
	fd.Clear()
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	if r, err := e.PutMany([]Key{key(3)}, [][]byte{{1}}); err != nil || len(r.Stored) != 1 {
		t.Fatalf("after a good checkpoint: %v", err)
	}
	if s := e.Stats(); s.CheckpointFailingFor != 0 {
		t.Fatalf("failing for %s after a good checkpoint", s.CheckpointFailingFor)
	}
}
