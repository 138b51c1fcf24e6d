package torture

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// Bit flips in the metadata containers. The seq in a container header is covered by no
// checksum in LMCache's format, so one flipped bit there could make recovery continue from
// the older checkpoint; a flip anywhere else in a container must make it invalid (or leave
// it readable) and recovery must say so when it falls back.
//
// A rollback is a recovery that continues from a state older than the newest valid
// checkpoint. Reported, it is allowed (the selection was in doubt, or the newest container
// was invalid and the report says what was lost); silent, it is a violation.

// flipRef is the unflipped recovery a flip is judged against.
type flipRef struct {
	container int               // the container the unflipped recovery used
	seq       uint64            // its seq
	state     map[uint64]uint64 // the keys it served (idx → version)
}

// flipRuns recovers two copies of the image: one with a random bit of a random
// container's header seq flipped, one with a random bit flipped anywhere in a random
// container's header (its first 48 bytes: LMCache's header and rbctl's seal) or payload.
func flipRuns(sum *Summary, cycle int, devPath string, g Geometry, cfg engine.Config, rng *rand.Rand, ref flipRef, history map[uint64]map[uint64]bool) {
	for _, seqOnly := range []bool{true, false} {
		mem, err := memCopy(devPath)
		if err != nil {
			sum.problem("cycle %d: %v", cycle, err)
			return
		}
		cs, err := engine.ReadContainers(mem, cfg)
		if err != nil {
			sum.problem("cycle %d: %v", cycle, err)
			return
		}
		i := rng.IntN(2)
		if cs[i].Problem == "empty" {
			i = 1 - i
		}
		c := cs[i]
		var off int64
		var what string
		if seqOnly {
			bit := rng.IntN(64)
			off = c.Offset + 12 + int64(bit/8) // header bytes 12..20: seq
			mem.Bytes()[off] ^= 1 << (bit % 8)
			what = fmt.Sprintf("bit %d of container %d's seq", bit, i)
			sum.FlipSeqRuns++
		} else {
			n := int64(48)
			if c.PayloadLen <= uint64(cfg.MetaTotalBytes/2-int64(cfg.BlockAlign)) {
				n += int64(c.PayloadLen)
			}
			at := rng.Int64N(n)
			off = c.Offset + at
			if at >= 48 {
				off = c.Offset + int64(cfg.BlockAlign) + at - 48
			}
			bit := rng.IntN(8)
			mem.Bytes()[off] ^= 1 << bit
			what = fmt.Sprintf("bit %d of container %d at offset %d", bit, i, off-c.Offset)
			sum.FlipContainerRuns++
		}
		judgeFlip(sum, cycle, what, mem, g, cfg, ref, history)
	}
}

func judgeFlip(sum *Summary, cycle int, what string, mem *blockdev.Mem, g Geometry, cfg engine.Config, ref flipRef, history map[uint64]map[uint64]bool) {
	e, err := engine.OpenWith(mem, cfg, engine.OpenOptions{AcceptDoubt: true})
	if err != nil {
		cs, _ := engine.ReadContainers(mem, cfg)
		if errors.Is(err, engine.ErrNoCheckpoint) && !cs[1-ref.container].Valid {
			sum.FlipRefused++ // the other container was already invalid: nothing left to use
			return
		}
		sum.RecoveryErrors++
		sum.problem("cycle %d: %s: recovery failed: %v", cycle, what, err)
		return
	}
	defer e.CloseNoCheckpoint()
	rep := e.Stats().Recovery
	sel := rep.Selection
	for _, c := range sel.Candidates {
		if c.Damaged() {
			sum.FlipSeqRepaired++
			break
		}
	}
	// Served bytes are checked against every version ever written; the state against
	// the unflipped recovery's.
	ex := anyVersionSeen(history)
	res, state := Verify(e, g, ex, true)
	res.KeysVerified, res.MustSurvive, res.Filled = 0, 0, 0 // counted once, in the main recovery
	sum.add(cycle, what, res)
	newestValid := sel.Candidates[ref.container].Usable
	switch {
	case rep.Container == ref.container:
		if !sameState(state, ref.state) {
			sum.RecoveryErrors++
			sum.problem("cycle %d: %s: recovered container %d as before, but %d keys instead of %d", cycle, what, rep.Container, len(state), len(ref.state))
			return
		}
		sum.FlipSameState++
	case !newestValid && sel.Fallback:
		sum.FlipFallbacks++ // the flip broke the newest container; the report says what was lost
	case sel.Fallback || sel.Doubt:
		sum.RollbacksReported++
	default:
		sum.SilentRollbacks++
		sum.problem("cycle %d: %s: recovered container %d (seq %d) though container %d (seq %d) is valid, and nothing says so: %s",
			cycle, what, rep.Container, rep.Seq, ref.container, ref.seq, sel.Reason)
	}
}

// seqNewer is the engine's order of seqs (serial numbers: a wrap keeps the order).
func seqNewer(a, b uint64) bool { return int64(a-b) > 0 }

func sameState(a, b map[uint64]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
