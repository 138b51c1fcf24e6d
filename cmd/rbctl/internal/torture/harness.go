package torture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// Options configures a torture run.
type Options struct {
	Dir      string // where the run's own directory (device file, side logs) is made and kept ("": the temp dir, removed)
	Kills    int    // cycles ending in SIGKILL (clean-close cycles come on top)
	Seed     uint64
	Geometry Geometry
	Slots    int64
	Workers  int // writer goroutines (each owns a share of the keys)
	// Slots, when > 0 and Geometry is left zero, is the default geometry with this many
	// slots.
	// KeyFactor: the key space is KeyFactor × slots (default 2), so the cache fills and
	// puts also fail for lack of a slot.
	KeyFactor int
	// The writer runs a random time in [MinRun, MaxRun] after it reports ready.
	MinRun, MaxRun time.Duration
	// Every TornEvery-th cycle tears a metadata write (half a checkpoint reaches the file)
	// and SIGKILLs itself right there. Every CorruptEvery-th cycle the recovered image is
	// also checked with its newest container corrupted (magic, then CRC, alternately).
	// Every CleanEvery-th cycle the writer stops by itself after some ops and closes
	// cleanly. 0 disables each.
	TornEvery, CorruptEvery, CleanEvery int
	// Every FaultEvery-th cycle (offset by one) the writer's data writes fail at random
	// (EIO, ENOSPC, torn-with-error; FaultProb each, default 2%).
	FaultEvery int
	FaultProb  float64
	// Command returns the base command of a writer process; the harness adds the
	// environment. It must run RunWriterFromEnv (a re-exec'ed test binary or
	// `rbctl torture writer`).
	Command func() *exec.Cmd
	// Stop, when closed, ends the run before the next cycle (Ctrl-C); the summary is marked
	// Interrupted and covers the cycles that completed.
	Stop <-chan struct{}
	// Progress, when set, gets one line per cycle.
	Progress io.Writer
	// Step, when set, is called after each cycle with the kills done of Kills.
	Step func(kills, of int)
}

func (o *Options) defaults() {
	if o.Geometry.Slots == 0 {
		o.Geometry = DefaultGeometry()
		if o.Slots > 0 {
			o.Geometry.Slots = o.Slots
		}
	}
	if o.Workers <= 0 {
		o.Workers = 3
	}
	if o.KeyFactor <= 0 {
		o.KeyFactor = 2
	}
	if o.MaxRun <= 0 {
		o.MinRun, o.MaxRun = 20*time.Millisecond, 250*time.Millisecond
	}
	if o.FaultProb <= 0 {
		o.FaultProb = 0.02
	}
	if o.MinRun > o.MaxRun {
		o.MinRun = o.MaxRun
	}
}

// Run formats a file-backed cache and runs the kill/recover/verify cycles. The error is
// for a harness failure (a writer that could not start, a side log that cannot be read);
// invariant violations are counted in the Summary.
func Run(opts Options) (*Summary, error) {
	opts.defaults()
	if opts.Command == nil {
		return nil, errors.New("torture: Options.Command is required (how to start a writer process)")
	}
	if opts.CleanEvery == 1 && opts.Kills > 0 {
		return nil, errors.New("torture: CleanEvery 1 makes every cycle clean, so no kill is ever counted (0: never, or at least 2)")
	}
	start := time.Now()
	// A directory of its own, so that nothing already in opts.Dir is written over; kept
	// (with the device and the side logs) when opts.Dir names where.
	dir, err := os.MkdirTemp(opts.Dir, "rbctl-torture-")
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		defer os.RemoveAll(dir)
	}
	g := opts.Geometry
	devPath := filepath.Join(dir, "torture.dev")
	if err := formatFile(devPath, g); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x7047))
	sum := &Summary{Seed: opts.Seed}
	// Rotate the writer's backend; io_uring only where the kernel offers it.
	backends := []string{BackendPosix, BackendPosixDirect, BackendAio, BackendUring}
	if d, err := openBackend(devPath, BackendUring); err != nil {
		backends = backends[:3]
		sum.UringSkipped = err.Error()
	} else {
		d.Close()
	}
	sum.Backends, sum.CyclesByBackend = backends, map[string]int{}
	baseline := map[uint64]uint64{}
	history := map[uint64]map[uint64]bool{}
	keys := uint64(opts.KeyFactor) * uint64(g.Slots)
	corruptMode := 0
	var prevContainers [2]engine.ContainerInfo
	for cycle := 1; sum.Kills < opts.Kills; cycle++ {
		select {
		case <-opts.Stop:
			sum.Interrupted = true
			sum.Elapsed = time.Since(start)
			return sum, nil
		default:
		}
		sum.Cycles++
		wc := WriterConfig{
			Device: devPath, Log: filepath.Join(dir, fmt.Sprintf("cycle-%04d.log", cycle)),
			Cycle: uint64(cycle), Seed: rng.Uint64(), Workers: opts.Workers, Keys: keys, Geometry: g,
			Format:     []engine.CheckpointFormat{engine.CheckpointCompact, engine.CheckpointLMCacheV1}[cycle%2],
			Deallocate: cycle%3 == 0,
			Backend:    backends[cycle/2%len(backends)],
		}
		clean := opts.CleanEvery > 0 && cycle%opts.CleanEvery == 0
		torn := !clean && opts.TornEvery > 0 && cycle%opts.TornEvery == 0
		if torn {
			wc.TornMetaWrite = 1 + rng.Int64N(6)
			wc.TornFraction = 0.05 + 0.55*rng.Float64()
		}
		if clean {
			wc.MaxOps = 50 + rng.Int64N(200)
		}
		if opts.FaultEvery > 0 && cycle%opts.FaultEvery == 1%opts.FaultEvery {
			wc.WriteFaultProb = opts.FaultProb
			sum.FaultCycles++
		}
		runFor := opts.MinRun + time.Duration(rng.Int64N(int64(opts.MaxRun-opts.MinRun)+1))
		outcome, err := runWriter(opts.Command, wc, runFor, clean)
		if err != nil {
			return sum, fmt.Errorf("cycle %d: %w", cycle, err)
		}
		switch outcome {
		case exitedClean:
			sum.CleanCloses++
		case killedByUs:
			sum.Kills++
		case killedItself:
			sum.Kills++
			sum.TornKills++
		}
		recs, err := ReadLog(wc.Log)
		if err != nil {
			return sum, err
		}
		ex := Expect(baseline, recs)
		sum.Puts += ex.Puts
		sum.Deletes += ex.Deletes
		sum.Checkpoints += ex.Checkpoints
		sum.FailedPuts += ex.FailedPuts
		sum.WriterWrong += ex.WriterWrong
		sum.WriterUnloadable += ex.WriterUnloadable
		if ex.WriterWrong+ex.WriterUnloadable > 0 {
			sum.problem("cycle %d: writer logged %d wrong loads and %d failed loads", cycle, ex.WriterWrong, ex.WriterUnloadable)
		}
		if ex.Ready < 0 && outcome == killedItself {
			sum.TornBeforeReady++ // the tear hit a metadata write of Open itself
		} else if ex.Ready != len(baseline) {
			sum.ReadyMismatch++
			sum.problem("cycle %d: writer recovered %d keys, the verifier %d from the same image", cycle, ex.Ready, len(baseline))
		}
		for idx, vs := range ex.Ever {
			if history[idx] == nil {
				history[idx] = map[uint64]bool{}
			}
			for v := range vs {
				history[idx][v] = true
			}
		}

		cfg := EngineConfig(g, wc.Format, false)
		mem, err := memCopy(devPath)
		if err != nil {
			return sum, err
		}
		e, err := engine.Open(mem, cfg)
		if err != nil {
			sum.RecoveryErrors++
			sum.problem("cycle %d: recovery failed: %v", cycle, err)
			continue
		}
		rep := e.Stats().Recovery
		sum.CyclesByBackend[wc.Backend]++
		if ex.LastCkSeq != 0 && seqNewer(ex.LastCkSeq, rep.Seq) && !rep.Selection.Fallback && !rep.Selection.Doubt {
			// SIGKILL keeps every write the kernel took: the last completed checkpoint is intact.
			sum.SilentRollbacks++
			sum.problem("cycle %d: recovered seq %d, older than the completed checkpoint seq %d, and nothing says so: %s", cycle, rep.Seq, ex.LastCkSeq, rep.Selection.Reason)
		}
		for _, c := range rep.Containers {
			// A container that turned invalid during this cycle (not one left over).
			if outcome == killedByUs && !c.Valid && c != prevContainers[c.Index] {
				sum.KillTornContainers++
			}
		}
		prevContainers = rep.Containers
		if outcome == killedItself && ex.TornLen > 0 {
			for _, c := range rep.Containers {
				if ex.TornOff < c.Offset || ex.TornOff >= c.Offset+e.Layout().ContainerBytes {
					continue
				}
				if c.Valid {
					// The tear left this container consistent: it fell in zero padding (a
					// header block keeps its 32-byte header) or rewrote identical bytes of
					// the older checkpoint. Its CRC vouches for it.
					sum.TornHarmless++
				} else {
					sum.TornDetected++
					if rep.Container != 1-c.Index {
						sum.RecoveryErrors++
						sum.problem("cycle %d: container %d torn and invalid, but recovery used container %d", cycle, c.Index, rep.Container)
					}
				}
			}
		}
		res, state := Verify(e, g, ex, true)
		e.CloseNoCheckpoint()
		sum.add(cycle, "recovery", res)
		baseline = state

		if opts.CorruptEvery > 0 && cycle%opts.CorruptEvery == 0 {
			corruptMode++
			corruptRun(sum, cycle, devPath, g, cfg, history, corruptMode%2 == 0, rep.Container)
			flipRuns(sum, cycle, devPath, g, cfg, rng, flipRef{container: rep.Container, seq: rep.Seq, state: state}, history)
		}
		if opts.Step != nil {
			opts.Step(sum.Kills, opts.Kills)
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "cycle %d: %s after %v, %d acked puts, %d deletes, %d checkpoints; recovered seq %d from container %d: %d entries, %d verified, %d must-survive, %d free filled; violations %d\n",
				cycle, outcome, runFor.Round(time.Millisecond), ex.Puts, ex.Deletes, ex.Checkpoints, rep.Seq, rep.Container,
				res.Entries, res.KeysVerified, res.MustSurvive, res.Filled, res.Violations())
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// corruptRun recovers a copy of the image whose newest valid container has a flipped magic
// byte (or payload byte, failing its CRC): recovery must use the other container, and even
// from that older state never serve wrong bytes or leak a slot.
func corruptRun(sum *Summary, cycle int, devPath string, g Geometry, cfg engine.Config, history map[uint64]map[uint64]bool, crc bool, newest int) {
	mem, err := memCopy(devPath)
	if err != nil {
		sum.problem("cycle %d: %v", cycle, err)
		return
	}
	cs, err := engine.ReadContainers(mem, cfg)
	if err != nil || (!cs[0].Valid && !cs[1].Valid) || newest < 0 {
		sum.CorruptSkipped++
		return
	}
	off := cs[newest].Offset
	if crc {
		off += int64(cfg.BlockAlign) // first payload byte
	}
	mem.Bytes()[off] ^= 0xFF
	sum.CorruptRuns++
	e, err := engine.Open(mem, cfg)
	if !cs[1-newest].Valid {
		// The other container was already invalid (a kill interrupted its checkpoint):
		// with both bad, recovery must refuse rather than serve anything.
		if err == nil {
			e.CloseNoCheckpoint()
			sum.RecoveryErrors++
			sum.problem("cycle %d: both containers invalid, yet Open succeeded", cycle)
		} else if errors.Is(err, engine.ErrNoCheckpoint) {
			sum.CorruptBothRefused++
		} else {
			sum.RecoveryErrors++
			sum.problem("cycle %d: both containers invalid: Open failed with %v, want ErrNoCheckpoint", cycle, err)
		}
		return
	}
	if err != nil {
		sum.RecoveryErrors++
		sum.problem("cycle %d: recovery with container %d corrupted failed: %v", cycle, newest, err)
		return
	}
	defer e.CloseNoCheckpoint()
	rep := e.Stats().Recovery
	if !rep.Selection.Fallback {
		sum.SilentRollbacks++
		sum.problem("cycle %d: container %d (the newest) corrupted, recovery fell back to container %d without saying so: %s", cycle, newest, rep.Container, rep.Selection.Reason)
	}
	if rep.Container == 1-newest && rep.Seq == cs[1-newest].Seq {
		sum.CorruptUsedOther++
	} else {
		sum.RecoveryErrors++
		sum.problem("cycle %d: container %d corrupted (crc=%v), recovery used container %d seq %d", cycle, newest, crc, rep.Container, rep.Seq)
	}
	// Any version ever written, or absence, is a legitimate older state.
	ex := anyVersionSeen(history)
	res, _ := Verify(e, g, ex, true)
	res.KeysVerified, res.MustSurvive, res.Filled = 0, 0, 0 // counted once, in the main recovery
	sum.add(cycle, "corrupt container", res)
}

type writerOutcome int

const (
	killedByUs writerOutcome = iota
	killedItself
	exitedClean
)

func (o writerOutcome) String() string {
	return [...]string{"SIGKILL", "torn checkpoint + self-SIGKILL", "clean close"}[o]
}

// runWriter starts a writer process, waits until it has recovered, lets it run, and
// SIGKILLs it (unless it is a clean cycle, which it waits out).
func runWriter(base func() *exec.Cmd, wc WriterConfig, runFor time.Duration, clean bool) (writerOutcome, error) {
	js, err := json.Marshal(wc)
	if err != nil {
		return 0, err
	}
	cmd := base()
	cmd.Env = append(os.Environ(), EnvWriter+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	// A writer must not outlive its harness (an interrupted run), and runs in a process group
	// of its own: a terminal's Ctrl-C goes to the foreground group, and a writer that took it
	// (exit 130) ended the run as a harness failure without the partial table; the harness
	// alone takes it and stops, as when only its pid is signalled.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start writer: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	fail := func(err error) (writerOutcome, error) {
		return 0, fmt.Errorf("writer %s: %w\n%s", wc.Log, err, tail(stderr.String(), 2000))
	}
	// Ready: the R record is in the side log.
	deadline := time.Now().Add(2 * time.Minute)
	for ready := false; !ready; {
		select {
		case err := <-done:
			return classify(err, false, clean, fail)
		case <-time.After(3 * time.Millisecond):
		}
		if b, err := os.ReadFile(wc.Log); err == nil && bytes.HasPrefix(b, []byte("R ")) {
			ready = true
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fail(errors.New("not ready after 2 minutes"))
		}
	}
	if clean {
		select {
		case err := <-done:
			return classify(err, false, clean, fail)
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			<-done
			return fail(errors.New("clean cycle did not end by itself in 2 minutes"))
		}
	}
	if wc.TornMetaWrite > 0 {
		// The writer kills itself at its Nth checkpoint write; should it not get there
		// (few checkpoints on a starved machine), it is killed like any other.
		runFor = 40 * runFor
	}
	select {
	case err := <-done:
		return classify(err, false, clean, fail)
	case <-time.After(runFor):
	}
	cmd.Process.Signal(syscall.SIGKILL)
	return classify(<-done, true, clean, fail)
}

func classify(err error, weKilled, clean bool, fail func(error) (writerOutcome, error)) (writerOutcome, error) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			if weKilled {
				return killedByUs, nil
			}
			return killedItself, nil
		}
		return fail(err)
	}
	if err != nil {
		return fail(err)
	}
	if !clean {
		return fail(errors.New("writer exited by itself without being killed"))
	}
	return exitedClean, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// formatFile creates the device file and formats an empty cache on it.
func formatFile(path string, g Geometry) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, blockdev.DataFileMode)
	if err != nil {
		return err
	}
	if err := f.Truncate(g.DeviceSize()); err != nil {
		f.Close()
		return err
	}
	f.Close()
	dev, err := blockdev.OpenFile(path, blockdev.FileOptions{QueueDepth: 4})
	if err != nil {
		return err
	}
	e, err := engine.Format(dev, EngineConfig(g, engine.CheckpointCompact, false))
	if err != nil {
		dev.Close()
		return fmt.Errorf("format %s: %w", path, err)
	}
	return e.Close()
}

// anyVersionSeen is the expectation after a fallback or a corrupted container: every
// version ever written of each key, or its absence, is a legitimate older state.
func anyVersionSeen(history map[uint64]map[uint64]bool) Expectation {
	ex := Expectation{Allowed: map[uint64][]keyState{}, Ever: history, Ready: -1}
	for idx, vs := range history {
		a := []keyState{{}}
		for v := range vs {
			a = append(a, keyState{v})
		}
		ex.Allowed[idx] = a
	}
	return ex
}
