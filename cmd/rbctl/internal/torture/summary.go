package torture

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/rbctl/rbctl/reports"
)

// Summary is the outcome of a torture run. The violation counters must all be zero.
type Summary struct {
	Interrupted     bool // stopped by Options.Stop: a partial run
	Seed            uint64
	Backends        []string       // the writer's device backends, rotated per cycle
	CyclesByBackend map[string]int // cycles run through each
	UringSkipped    string         // why io_uring was left out ("" when used)
	Cycles          int
	Kills           int // SIGKILLs, by the harness or (torn cycles) by the writer itself
	TornKills       int // writer killed itself right after tearing a metadata write
	// A torn metadata write either leaves its container invalid (recovery must then use
	// the other one) or harmless (the tear fell in zero padding or rewrote identical bytes,
	// and the container's CRC still vouches for it).
	TornDetected, TornHarmless int
	TornBeforeReady            int // the tear hit a metadata write made by Open itself
	CleanCloses                int
	FaultCycles                int // cycles whose writer ran with failing data writes
	FailedPuts                 int // puts that failed (no slot, or an injected write fault)

	CorruptRuns        int // recoveries of an image with its newest container corrupted
	CorruptUsedOther   int // ... that recovered from the other container
	CorruptBothRefused int // ... whose other container was already invalid: Open refused (ErrNoCheckpoint)
	CorruptSkipped     int // images with no valid container (nothing to corrupt)
	// Bit flips (flips.go), on the corrupt cycles: one random bit of a random container's
	// header seq, and one random bit anywhere in a random container's header or payload.
	FlipSeqRuns, FlipContainerRuns int
	FlipSameState                  int // recovered the unflipped state: same container, same keys
	FlipSeqRepaired                int // a damaged header seq was noticed (and a checksummed one used)
	FlipFallbacks                  int // the flip broke the newest container: fell back, and said so
	FlipRefused                    int // no valid container left: Open refused (ErrNoCheckpoint)
	// RollbacksReported: a state older than the newest valid checkpoint was recovered, and
	// the report says so (in doubt). SilentRollbacks, the same without a report, is a
	// violation (checked after every recovery, flipped or not).
	RollbacksReported int
	// KillTornContainers counts plain SIGKILLs that landed inside a checkpoint write: after
	// the kill one container failed its CRC (new payload, old header) and recovery used the
	// other one.
	KillTornContainers int

	Puts, Deletes, Checkpoints int // acknowledged by writers
	KeysVerified               int // index entries loaded byte-exact after recoveries
	MustSurvive                int // checks of keys acknowledged before the last checkpoint
	FilledSlots                int64

	CorruptReads, StaleVersions, Unloadable, Lost, Resurrected, Foreign int
	SilentRollbacks                                                     int
	DupSlots, BadOffsets, Accounting, ReadyMismatch, RecoveryErrors     int
	LeakedSlots, Overbooked                                             int64
	WriterWrong, WriterUnloadable                                       int

	Problems []string
	Elapsed  time.Duration
}

// Violations is the total number of invariant violations.
func (s *Summary) Violations() int {
	return s.CorruptReads + s.StaleVersions + s.Unloadable + s.Lost + s.Resurrected + s.Foreign + s.SilentRollbacks +
		s.DupSlots + s.BadOffsets + s.Accounting + s.ReadyMismatch + s.RecoveryErrors +
		int(s.LeakedSlots) + int(s.Overbooked) + s.WriterWrong + s.WriterUnloadable
}

func (s *Summary) add(cycle int, what string, r Result) {
	s.KeysVerified += r.KeysVerified
	s.MustSurvive += r.MustSurvive
	s.FilledSlots += r.Filled
	s.CorruptReads += r.CorruptReads
	s.StaleVersions += r.StaleVersion
	s.Unloadable += r.Unloadable
	s.Lost += r.Lost
	s.Resurrected += r.Resurrected
	s.Foreign += r.Foreign
	s.DupSlots += r.DupSlots
	s.BadOffsets += r.BadOffsets
	s.Accounting += r.Accounting
	s.LeakedSlots += r.LeakedSlots
	s.Overbooked += r.Overbooked
	for _, p := range r.Problems {
		s.problem("cycle %d (%s): %s", cycle, what, p)
	}
}

func (s *Summary) problem(format string, args ...any) {
	if len(s.Problems) < 20 {
		s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
	}
}

// WriteText renders the summary as a measure/value table, then the problems found.
func (s *Summary) WriteText(w io.Writer) error {
	t := reports.NewTable(w)
	t.Header("measure", "value")
	var err error
	row := func(k string, v any) {
		if err == nil {
			err = t.Append(k, fmt.Sprint(v))
		}
	}
	row("seed", s.Seed)
	row("cycles", s.Cycles)
	for _, b := range s.Backends {
		row("  through "+b, s.CyclesByBackend[b])
	}
	if s.UringSkipped != "" {
		row("  io_uring not used", s.UringSkipped)
	}
	row("kills (SIGKILL)", s.Kills)
	row("  of which torn checkpoint + self-kill", s.TornKills)
	row("  torn container invalid, other used", s.TornDetected)
	row("  torn container still valid (tear in padding)", s.TornHarmless)
	row("  tear hit a write of Open itself", s.TornBeforeReady)
	row("clean closes", s.CleanCloses)
	row("cycles with injected write faults", s.FaultCycles)
	row("kills that tore a checkpoint (other container used)", s.KillTornContainers)
	row("corrupt-container recoveries: other used / both bad, refused", fmt.Sprintf("%d: %d / %d", s.CorruptRuns, s.CorruptUsedOther, s.CorruptBothRefused))
	row("bit flips: header seq / anywhere in a container", fmt.Sprintf("%d / %d", s.FlipSeqRuns, s.FlipContainerRuns))
	row("  same state / fallback reported / both bad, refused / rollback reported", fmt.Sprintf("%d / %d / %d / %d", s.FlipSameState, s.FlipFallbacks, s.FlipRefused, s.RollbacksReported))
	row("  damaged header seqs noticed", s.FlipSeqRepaired)
	row("acked puts / deletes / checkpoints", fmt.Sprintf("%d / %d / %d", s.Puts, s.Deletes, s.Checkpoints))
	row("failed puts (no slot or injected fault)", s.FailedPuts)
	row("keys verified byte-exact", s.KeysVerified)
	row("acked-before-checkpoint keys checked", s.MustSurvive)
	row("free slots filled (leak check)", s.FilledSlots)
	row("corrupt reads", s.CorruptReads)
	row("silent rollbacks", s.SilentRollbacks)
	row("lost keys", s.Lost)
	row("resurrected keys", s.Resurrected)
	row("stale versions", s.StaleVersions)
	row("unloadable indexed keys", s.Unloadable)
	row("slots owned twice", s.DupSlots)
	row("leaked slots", s.LeakedSlots)
	row("overbooked slots", s.Overbooked)
	row("accounting errors", s.Accounting)
	row("recovery errors", s.RecoveryErrors)
	row("writer wrong/failed loads", fmt.Sprintf("%d / %d", s.WriterWrong, s.WriterUnloadable))
	row("violations", s.Violations())
	row("elapsed", s.Elapsed.Round(1e6))
	if err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	if s.Interrupted {
		fmt.Fprintln(w, "interrupted: partial result (the cycles that completed before Ctrl-C)")
	}
	for _, p := range s.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
	return nil
}

// MarshalJSON writes the summary with snake_case keys, as every rbctl --json does
// (torn_kills, keys_verified, ...), the elapsed time in seconds and the violation total.
func (s *Summary) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	v := reflect.ValueOf(s).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		switch f.Name {
		case "Interrupted":
			if s.Interrupted {
				m["interrupted"] = true
			}
		case "Elapsed":
			m["elapsed_seconds"] = s.Elapsed.Seconds()
		default:
			m[snake(f.Name)] = v.Field(i).Interface()
		}
	}
	m["violations"] = s.Violations()
	return json.Marshal(m)
}

// snake turns a Go field name into a JSON key: KillTornContainers -> kill_torn_containers.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
