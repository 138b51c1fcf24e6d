package torture

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

// EnvWriter names the environment variable that carries a WriterConfig (JSON) to a writer
// process: a test binary's TestMain or `rbctl torture writer` checks it and calls
// RunWriterFromEnv.
const EnvWriter = "RBCTL_TORTURE_WRITER"

// Geometry is the cache layout the torture runs on (small, so a cycle is fast and the
// cache fills up: the key space is several times the slot count).
type Geometry struct {
	SlotBytes      int64
	MetaTotalBytes int64
	Slots          int64
}

// DefaultGeometry: 64 KiB slots (4 KiB header), a 1 MiB metadata region (LMCache's test
// layout) and 96 slots: a 7 MiB device.
func DefaultGeometry() Geometry {
	return Geometry{SlotBytes: 64 << 10, MetaTotalBytes: 1 << 20, Slots: 96}
}

// DeviceSize is the file size for the geometry.
func (g Geometry) DeviceSize() int64 { return g.MetaTotalBytes + g.Slots*g.SlotBytes }

// MaxPayload is the largest payload a slot holds.
func (g Geometry) MaxPayload() int { return int(g.SlotBytes) - 4096 }

// WriterConfig is everything a writer process needs.
type WriterConfig struct {
	Device     string
	Log        string
	Cycle      uint64 // versions written are Cycle<<32 | n, unique across cycles
	Seed       uint64
	Workers    int
	Keys       uint64
	Geometry   Geometry
	Format     engine.CheckpointFormat
	Deallocate bool
	Backend    string // BackendPosix, BackendPosixDirect, BackendUring or BackendAio
	// TornMetaWrite > 0 tears the Nth write into the metadata region (a prefix of
	// TornFraction of it reaches the file) and then SIGKILLs the process: a power cut in
	// the middle of a checkpoint.
	TornMetaWrite int64
	TornFraction  float64 // share of the torn write that reaches the file (64-byte granules)
	// WriteFaultProb > 0 fails that fraction of data-region writes with EIO, ENOSPC or a
	// torn write reported as an error (each), through faultdev.Device.
	WriteFaultProb float64
	// MaxOps > 0 stops after that many operations and closes the engine cleanly (final
	// checkpoint), logging F.
	MaxOps int64
}

// Backends the writer can drive the device file through.
const (
	BackendPosix       = "posix"        // pread/pwrite, buffered
	BackendPosixDirect = "posix-direct" // pread/pwrite, O_DIRECT
	BackendUring       = "io_uring"     // io_uring, O_DIRECT
	BackendAio         = "aio"          // Linux native AIO, O_DIRECT
)

func openBackend(path, backend string) (blockdev.Device, error) {
	switch backend {
	case BackendPosix, "":
		return blockdev.OpenFile(path, blockdev.FileOptions{QueueDepth: 8})
	case BackendPosixDirect:
		return blockdev.OpenFile(path, blockdev.FileOptions{Direct: true, QueueDepth: 8})
	case BackendUring:
		return blockdev.OpenUring(path, blockdev.UringOptions{QueueDepth: 16, Rings: 1})
	case BackendAio:
		return blockdev.OpenAio(path, blockdev.FileOptions{Direct: true, QueueDepth: 16})
	}
	return nil, fmt.Errorf("torture: unknown backend %q", backend)
}

// EngineConfig is the engine configuration writer and verifier share: frequent periodic
// and forced checkpoints so kills land in every phase of the checkpoint cycle.
func EngineConfig(g Geometry, format engine.CheckpointFormat, deallocate bool) engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = g.SlotBytes
	c.MetaTotalBytes = g.MetaTotalBytes
	c.CheckpointInterval = 100 * time.Millisecond
	c.IdleQuiet = 5 * time.Millisecond
	c.ForceAfterOps = 48
	c.ForceAfter = 150 * time.Millisecond
	c.VerifyOnLoad = true
	c.RecoveryReaders = 4
	c.LoadCheckpoint = true
	c.PayloadChecksum = true
	if format != "" {
		c.CheckpointFormat = format
	}
	c.DeallocateOnDelete = deallocate
	c.DeallocateBatch = 4
	c.StoreWorkers, c.LookupWorkers, c.LoadWorkers = 1, 1, 1
	return c
}

// RecClosed marks a clean Close (final checkpoint written).
const RecClosed Kind = 'F'

// RunWriterFromEnv runs a writer configured by $RBCTL_TORTURE_WRITER. ok is false when the
// variable is not set (the caller is not a writer process).
func RunWriterFromEnv() (ok bool, err error) {
	s := os.Getenv(EnvWriter)
	if s == "" {
		return false, nil
	}
	var wc WriterConfig
	if err := json.Unmarshal([]byte(s), &wc); err != nil {
		return true, fmt.Errorf("%s: %w", EnvWriter, err)
	}
	return true, RunWriter(wc)
}

// RunWriter opens the cache on wc.Device (recovering it) and drives it until killed (or
// MaxOps), logging to wc.Log.
func RunWriter(wc WriterConfig) error {
	if wc.Workers <= 0 {
		wc.Workers = 3
	}
	lg, err := createSideLog(wc.Log)
	if err != nil {
		return err
	}
	defer lg.close()
	fd, err := openBackend(wc.Device, wc.Backend)
	if err != nil {
		return err
	}
	var dev blockdev.Device = fd
	if p := wc.WriteFaultProb; p > 0 {
		// Failing data writes: the puts involved must fail cleanly (slot returned, key
		// absent), never be acknowledged.
		dev = faultdev.New(dev, wc.Seed^0xfa17,
			faultdev.Rule{Name: "data-eio", Class: faultdev.ClassWrite, OffLo: wc.Geometry.MetaTotalBytes, Prob: p, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}},
			faultdev.Rule{Name: "data-enospc", Class: faultdev.ClassWrite, OffLo: wc.Geometry.MetaTotalBytes, Prob: p, Fault: faultdev.Fault{Kind: faultdev.FaultENOSPC}},
			faultdev.Rule{Name: "data-torn", Class: faultdev.ClassWrite, OffLo: wc.Geometry.MetaTotalBytes, Prob: p, Fault: faultdev.Fault{Kind: faultdev.FaultTorn, TornUnit: 512}},
		)
	}
	if wc.TornMetaWrite > 0 {
		dev = faultdev.New(dev, wc.Seed, faultdev.Rule{
			Name: "torn-checkpoint", Class: faultdev.ClassWrite, OffHi: wc.Geometry.MetaTotalBytes,
			// Not a lone header block: its 32 meaningful bytes always survive a prefix tear.
			Pred:  func(o faultdev.OpInfo) bool { return o.Len != 4096 || o.Off%(wc.Geometry.MetaTotalBytes/2) != 0 },
			Nth:   wc.TornMetaWrite,
			Fault: faultdev.Fault{Kind: faultdev.FaultTorn, TornUnit: 64, Fraction: wc.TornFraction},
			Then: func(o faultdev.OpInfo) {
				lg.put("T %d %d", o.Off, o.Len)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			},
		})
	}
	cfg := EngineConfig(wc.Geometry, wc.Format, wc.Deallocate)
	e, err := engine.Open(dev, cfg)
	if err != nil {
		return fmt.Errorf("writer: open: %w", err)
	}
	max := wc.Geometry.MaxPayload()
	// Recovered keys: version read from the payload prefix.
	vers := make([]uint64, wc.Keys) // 0: absent
	n := 0
	var keys []engine.Key
	e.Entries(func(k engine.Key, _ engine.EntryMeta) bool {
		keys = append(keys, k)
		return true
	})
	buf := make([]byte, max)
	for _, k := range keys {
		idx, ok := IndexOf(k)
		if !ok || idx >= wc.Keys {
			continue
		}
		res, _ := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
		if res[0] {
			vers[idx] = binary.LittleEndian.Uint64(buf[8:16])
			n++
		}
	}
	rep := e.Stats().Recovery
	if err := lg.put("R %d %d %d", n, rep.Seq, rep.Container+1); err != nil {
		return err
	}

	var (
		ctr  atomic.Uint64
		ops  atomic.Int64
		stop atomic.Bool
		wg   sync.WaitGroup
		errs = make(chan error, wc.Workers+1)
	)
	for w := 0; w < wc.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(wc.Seed, uint64(w)+1))
			buf := make([]byte, max)
			var owned []uint64
			for idx := uint64(w); idx < wc.Keys; idx += uint64(wc.Workers) {
				owned = append(owned, idx)
			}
			for !stop.Load() {
				if wc.MaxOps > 0 && ops.Add(1) > wc.MaxOps {
					return
				}
				idx := owned[rng.IntN(len(owned))]
				k := KeyFor(idx)
				if err := writerStep(e, lg, rng, k, idx, &vers[idx], wc.Cycle<<32|ctr.Add(1), max, buf); err != nil {
					errs <- err
					stop.Store(true)
					return
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() { // checkpointer
		defer wg.Done()
		rng := rand.New(rand.NewPCG(wc.Seed, 999))
		for n := uint64(1); !stop.Load(); n++ {
			time.Sleep(time.Duration(2+rng.IntN(25)) * time.Millisecond)
			if err := lg.put("S %d", n); err != nil {
				errs <- err
				return
			}
			if err := e.CheckpointNow(); err != nil {
				lg.put("E %d", n)
				continue
			}
			if err := lg.put("C %d %d", n, e.Stats().CheckpointSeq); err != nil {
				errs <- err
				return
			}
		}
	}()
	if wc.MaxOps > 0 {
		for ops.Load() <= wc.MaxOps && len(errs) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		stop.Store(true)
	}
	wg.Wait()
	select {
	case err := <-errs:
		e.CloseNoCheckpoint()
		return err
	default:
	}
	if err := e.Close(); err != nil {
		return fmt.Errorf("writer: close: %w", err)
	}
	return lg.put("F")
}

// writerStep does one random operation on key idx, whose current version (0: absent) the
// calling worker alone tracks in *ver.
func writerStep(e *engine.Engine, lg *sideLog, rng *rand.Rand, k engine.Key, idx uint64, ver *uint64, newVer uint64, max int, buf []byte) error {
	keys := []engine.Key{k}
	if *ver == 0 {
		p := Payload(idx, newVer, max)
		if err := lg.put("I P %d %d", idx, newVer); err != nil {
			return err
		}
		res, _ := e.PutMany(keys, [][]byte{p})
		ok := len(res.Results) == 1 && res.Results[0] && len(res.Stored) == 1
		if ok {
			*ver = newVer
		}
		return lg.put("A P %d %d %s", idx, newVer, okFail(ok))
	}
	switch r := rng.IntN(100); {
	case r < 50: // delete
		if err := lg.put("I D %d %d", idx, *ver); err != nil {
			return err
		}
		ok := e.DeleteMany(keys, false)[0]
		err := lg.put("A D %d %d %s", idx, *ver, okFail(ok))
		if ok {
			*ver = 0
		}
		return err
	case r < 88: // load and check
		got, _ := e.LoadManyInto(keys, [][]byte{buf})
		if !got[0] {
			return lg.put("U %d %d", idx, *ver)
		}
		m, _ := e.Lookup(k)
		want := Payload(idx, *ver, max)
		if m.Size != len(want) || string(buf[:len(want)]) != string(want) {
			if err := lg.put("X %d %d", idx, *ver); err != nil {
				return err
			}
			return errors.New("writer: loaded wrong bytes")
		}
		return nil
	default: // lock, try a non-forced delete (must be refused), unlock
		if !e.ExistsMany(keys, true)[0] {
			return fmt.Errorf("writer: key %d not found by ExistsMany while indexed", idx)
		}
		if err := lg.put("I D %d %d", idx, *ver); err != nil {
			return err
		}
		ok := e.DeleteMany(keys, false)[0]
		err := lg.put("A D %d %d %s", idx, *ver, okFail(ok))
		e.UnlockMany(keys)
		if ok {
			return fmt.Errorf("writer: delete of locked key %d was not refused", idx)
		}
		return err
	}
}

func okFail(ok bool) string {
	if ok {
		return "ok"
	}
	return "fail"
}
