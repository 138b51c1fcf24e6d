package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
)

// TestPrefetchedVerificationIsVerification: recovery that reads the slot headers while it
// applies the checkpoint (startPrefetch) keeps and drops exactly what recovery that reads
// them afterwards does, in the same order with the same reasons: for small slots (read as
// 1 MiB extents) and large ones (a header read each), with a stale header, a header whose
// checksum differs from the checkpoint's, a prefetch read that fails (verification reads
// that slot again), and a sparse cache (no prefetch: it would read more than verification).
func TestPrefetchedVerificationIsVerification(t *testing.T) {
	for _, slotBytes := range []int64{8 << 10, 128 << 10} {
		for _, sparse := range []bool{false, true} {
			t.Run(fmt.Sprintf("slots %d KiB sparse %v", slotBytes>>10, sparse), func(t *testing.T) {
				c := compatConfig()
				c.SlotBytes = slotBytes
				const n = 300
				mem := blockdev.NewMem(c.MetaTotalBytes+int64(n+4)*slotBytes, 0)
				e, err := Format(mem, c)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i += 50 {
					ks, ps := make([]Key, 0, 50), make([][]byte, 0, 50)
					for j := i; j < i+50; j++ {
						ks, ps = append(ks, K(j)), append(ps, []byte(fmt.Sprint("payload ", j)))
					}
					if r, err := e.PutMany(ks, ps); err != nil || len(r.Stored) != 50 {
						t.Fatalf("put: %+v %v", r, err)
					}
				}
				if sparse {
					var gone []Key
					for i := 0; i < n; i++ {
						if i%3 != 0 {
							gone = append(gone, K(i))
						}
					}
					e.DeleteMany(gone, false)
				}
				offOf := func(i int) int64 {
					m, ok := e.Lookup(K(i))
					if !ok {
						t.Fatalf("key %d not held", i)
					}
					return m.Offset
				}
				// The unreadable slot comes first: verification reads it after checking the
				// prefetched ones, and must still give its verdicts in slot order.
				unread, stale, rewritten := offOf(6), offOf(30), offOf(60)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				b := mem.Bytes()
				clear(b[stale : stale+32])      // no header: stale
				b[rewritten+slotCRCOff] ^= 0xff // its CRC: rewritten after the checkpoint
				open := func(off bool, times int64) (*Engine, *faultdev.Device, int) {
					t.Helper()
					// Reads of key 6's slot fail: every one, or the first (the prefetch's when
					// there is one).
					fd := faultdev.New(mem.Reopen(), 1, faultdev.Rule{Name: "read", Class: faultdev.ClassRead,
						OffLo: unread, OffHi: unread + 512, Times: times, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
					noPrefetch = off
					uses := 0
					prefetched = func(*headerPrefetch) { uses++ }
					defer func() { noPrefetch, prefetched = false, nil }()
					re, err := Open(fd, c)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { re.CloseNoCheckpoint() })
					return re, fd, uses
				}
				withPre, fdPre, uses := open(false, 0)
				without, _, usesOff := open(true, 0)
				if want := 1; sparse {
					if uses != 0 {
						t.Fatalf("a sparse cache was prefetched")
					}
				} else if uses != want || usesOff != 0 {
					t.Fatalf("prefetches: %d with, %d without; want %d and 0", uses, usesOff, want)
				}
				if fdPre.Counts().Injected == 0 {
					t.Fatalf("the read fault did not fire")
				}
				if !slices.Equal(withPre.recovery.Dropped, without.recovery.Dropped) {
					t.Fatalf("dropped with prefetch %+v, without %+v", withPre.recovery.Dropped, without.recovery.Dropped)
				}
				if len(withPre.recovery.Dropped) != 3 {
					t.Fatalf("dropped %+v, want keys 6 (its header cannot be read), 30 and 60", withPre.recovery.Dropped)
				}
				var a, b2 []string
				withPre.Entries(func(k Key, m EntryMeta) bool { a = append(a, fmt.Sprint(k, m.Slot, m.Checksum)); return true })
				without.Entries(func(k Key, m EntryMeta) bool { b2 = append(b2, fmt.Sprint(k, m.Slot, m.Checksum)); return true })
				if !slices.Equal(a, b2) || len(a) == 0 {
					t.Fatalf("%d entries with prefetch, %d without, or not the same", len(a), len(b2))
				}
				if sparse {
					return
				}
				// A prefetch read that fails once: verification reads the slot again and keeps it.
				once, fd, _ := open(false, 1)
				if fd.Counts().Injected != 1 || len(once.recovery.Dropped) != 2 || once.recovery.Dropped[0].Slot == without.recovery.Dropped[0].Slot {
					t.Fatalf("a prefetch read failing once (%d faults): dropped %+v, want keys 30 and 60 only", fd.Counts().Injected, once.recovery.Dropped)
				}
			})
		}
	}
}
