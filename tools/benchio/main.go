// Command benchio compares rbctl's io_uring device path with fio on one pre-allocated file:
// the same block (slot) size, queue depth, O_DIRECT, random order, and run time, for writes
// and reads. `make bench-io` runs it through scripts/bench-io.sh.
//
// The rbctl side drives blockdev.UringDevice the way the engine does: every op is one whole
// slot (a 4 KiB header "LMCBLK01"+identity+length, then payload) from a registered buffer
// pool, and several submitters each hand the device batches of slots (like concurrent
// put_many / load_many_into calls) while one ring keeps QD ops in flight.
//
// Buffer footprint: the device row's batches are QD / submitters slots by default
// (-device-batch 0), so the rbctl side moves its bytes through QD × bs of buffers, as fio
// does (iodepth buffers of bs). The footprint is not neutral: on the virtio disk of
// docs/io_uring.md the host copies every transfer into or out of guest memory, and its
// per-request latency grew with the buffers in use (1 MiB reads at QD 32, block-layer p50:
// 3.0–3.4 ms from 8 MiB of buffers, 3.9–4.6 from 32 MiB, 4.7–5.5 from 128 MiB; fio 3.9–4.5
// from its 32 MiB). With LMCache's put_many chunk of 64 slots and two submitters the device
// row read into 128 MiB, and that footprint, not rbctl's read path, was most of the gap it
// measured. The engine rows keep -batch keys per PutMany / LoadManyInto (64, LMCache's
// chunk): a load verifies its payloads after reading them and needs more than QD reads
// queued to keep the ring full meanwhile, so their buffers stay larger than fio's.

// Each case runs -rounds rounds of every tool in rotating order; the rows print medians and
// the median of the rounds' ratios against the fio job with the better median, with a
// confidence interval for it (cases.go). The engine rows are in engine.go; engine-get is
// compared with fio reading the same payload transfers.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/internal/handoff"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/units"
)

type config struct {
	file          string
	qd            int
	runtime       time.Duration
	ramp          time.Duration
	batch         int // engine rows: keys per call
	deviceBatch   int // device row: slots per Submit
	submitters    int
	rings         int
	fixed         bool
	fio           string
	rounds        int
	ring          string
	engine        bool
	dealloc       node.Deallocation
	replayFlushes bool
	register      bool
	vectored      bool
	checksum      bool
	gap           time.Duration
	settle        bool
	leadFio       bool          // -lead fio: lead follows fio's measured start-up
	lead          time.Duration // idle before an in-process run's first I/O (runCase sets it per run)
	tools         []string      // nil: every tool
	fioMem        string        // fio's --mem: shmhuge or malloc (hugepages.go)
	fioEngine     string        // fio's --ioengine: io_uring or libaio (-fio-ioengine)
}

func main() {
	c := config{dealloc: node.DeallocateDevices}
	var bsList, rwList string
	flag.StringVar(&c.file, "file", "", "pre-allocated file (or block device) to run on")
	flag.StringVar(&bsList, "bs", "1M,64K", "block (slot) sizes")
	flag.StringVar(&rwList, "rw", "write,read", "directions")
	flag.IntVar(&c.qd, "qd", 32, "queue depth (fio iodepth; ring depth for rbctl)")
	flag.DurationVar(&c.runtime, "runtime", time.Second, "measured time per run")
	flag.DurationVar(&c.ramp, "ramp", 300*time.Millisecond, "warm-up before measuring")
	flag.IntVar(&c.batch, "batch", 64, "keys per PutMany/LoadManyInto call in the engine rows (a put_many chunk: LMCache uses 64 keys)")
	flag.IntVar(&c.deviceBatch, "device-batch", 0, "slots per Submit call in the device row (0: qd/submitters, so its buffers total qd × bs like fio's iodepth buffers)")
	flag.IntVar(&c.submitters, "submitters", 2, "concurrent submitting goroutines (concurrent put_many/load_many_into calls)")
	flag.IntVar(&c.rings, "rings", 1, "rings (fio runs one job, so 1 is the like-for-like setting)")
	flag.BoolVar(&c.fixed, "fixed", true, "register the buffer pool (fixed reads/writes, as the engine does)")
	flag.StringVar(&c.fio, "fio", "fio", "fio binary ('' to skip fio)")
	flag.IntVar(&c.rounds, "rounds", 8, "rounds per case (the order rotates; each round is printed, the rows give medians)")
	flag.StringVar(&c.ring, "ring", "default", "rbctl ring setup: default (the device's), plain, single (SINGLE_ISSUER), defer (SINGLE_ISSUER|DEFER_TASKRUN, waiting in the Go netpoller: the default's wait), defer-kwait (the same, waiting inside io_uring_enter), coop, sqpoll; or aio: rbctl's native AIO engine instead of a ring (no registered buffers: -fixed and -engine-register are off; compare with -fio-ioengine libaio)")
	flag.StringVar(&c.fioEngine, "fio-ioengine", "io_uring", "fio's I/O engine: io_uring (its fixedbufs jobs too) or libaio (the reference for -ring aio; no fixedbufs jobs)")
	flag.BoolVar(&c.engine, "engine", true, "add the engine-put/engine-get rows (engine.PutMany/LoadManyInto, deallocating as -engine-deallocate says)")
	flag.DurationVar(&c.gap, "gap", 0, "idle time before every run (the kernel finishes tearing down the last run's rings and registrations)")
	leadFlag := flag.String("lead", "fio", "idle between settling the file and an in-process run's first I/O: fio (as long as fio took from its launch to its first I/O, the median of its runs so far in the case, so that every tool starts on a disk idle for as long), or a duration (0: start at once)")
	flag.BoolVar(&c.settle, "settle", true, "flush the file before every run (and after the engine's fill), so that no run's flushes pay for the write-back of what ran before it (false: for comparison)")
	flag.BoolVar(&c.register, "engine-register", true, "engine-get registers its load buffers (engine.RegisterMemory); false: plain reads into unregistered memory")
	flag.BoolVar(&c.vectored, "engine-vectored", true, "engine-put writes aligned payloads without a copy (vectored writes); false: copies each payload behind its header")
	flag.BoolVar(&c.checksum, "engine-checksum", true, "engine rows with payload checksums (false: for diagnosis only; the format's default is on)")
	flag.Func("engine-deallocate", "which targets the engine rows deallocate freed slots on, as rbctl serve --deallocate: devices (the default: a block device or namespace that takes discards, never a regular file), all (a file too: punched holes), none; true and false are all and none", func(s string) error {
		switch s {
		case "true":
			s = "all"
		case "false":
			s = "none"
		}
		d, err := node.ParseDeallocation(s)
		c.dealloc = d
		return err
	})
	flag.BoolVar(&c.replayFlushes, "replay-flushes", true, "fio-replay and rbctl-replay replay the engine's flushes (its checkpoints') in their places (fio: datasyncs, rbctl: Flush), not only its writes (false: writes only)")
	fioMem := flag.String("fio-mem", "auto", "fio's buffer memory: shmhuge (huge pages, as rbctl's buffers), malloc (4 KiB pages; rbctl's buffers then too), auto (shmhuge when enough huge pages are free)")
	toolList := flag.String("tools", "", "run only these tools (comma separated: fio,fio-fixed,rbctl,engine,fio-payload,fio-payload-fixed,fio-replay,rbctl-replay), for diagnosis")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	execTrace := flag.String("trace", "", "write a Go execution trace of the whole run to this file (go tool trace), for diagnosis")
	flag.Parse()
	if err := parseLead(&c, *leadFlag); err != nil {
		fmt.Fprintln(os.Stderr, "benchio:", err)
		os.Exit(2)
	}
	if c.deviceBatch <= 0 {
		c.deviceBatch = max(1, c.qd/max(1, c.submitters))
	}
	if c.fioEngine != "io_uring" && c.fioEngine != "libaio" {
		fmt.Fprintf(os.Stderr, "benchio: -fio-ioengine %q: want io_uring or libaio\n", c.fioEngine)
		os.Exit(2)
	}
	if c.ring == "aio" { // no registered buffers in native AIO
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if (set["fixed"] && c.fixed) || (set["engine-register"] && c.register) {
			fmt.Fprintln(os.Stderr, "benchio: -ring aio has no registered buffers: drop -fixed and -engine-register (they are off with it)")
			os.Exit(2)
		}
		c.fixed, c.register = false, false
	} else if _, err := uringOptions(c); err != nil {
		fmt.Fprintln(os.Stderr, "benchio:", err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchio:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *execTrace != "" {
		f, err := os.Create(*execTrace)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchio:", err)
			os.Exit(1)
		}
		defer trace.Stop()
	}
	if *toolList != "" {
		for _, t := range strings.Split(*toolList, ",") {
			if !slices.Contains(toolNames[:], t) {
				fmt.Fprintf(os.Stderr, "benchio: -tools: unknown tool %q (known: %s)\n", t, strings.Join(toolNames[:], ","))
				os.Exit(2)
			}
			c.tools = append(c.tools, t)
		}
	}
	if c.file == "" {
		fmt.Fprintln(os.Stderr, "benchio: -file is required")
		os.Exit(2)
	}
	if fi, err := os.Stat(c.file); err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0) {
		why := "not a regular file or a block device"
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(os.Stderr, "benchio: -file %s: %s (benchio overwrites it: pass a pre-allocated file or a block device you mean to overwrite)\n", c.file, why)
		os.Exit(2)
	}
	maxBS := 0
	for _, bsStr := range strings.Split(bsList, ",") {
		bs, err := parseSize(bsStr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchio:", err)
			os.Exit(2)
		}
		maxBS = max(maxBS, bs)
	}
	var err error
	if c.fioMem, err = resolveFioMem(*fioMem, c.fio != "", c.qd, maxBS); err != nil {
		fmt.Fprintln(os.Stderr, "benchio:", err)
		os.Exit(2)
	}
	if c.fio != "" {
		out, err := exec.Command(c.fio, "--version").Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchio: %s --version: %v (install fio: scripts/setup.sh)\n", c.fio, err)
			os.Exit(1)
		}
		pages := "huge pages on both sides (fio --mem=shmhuge, rbctl's Alloc with THP)"
		if c.fioMem == "malloc" {
			pages = "4 KiB pages on both sides (fio --mem=malloc, benchio's buffers MADV_NOHUGEPAGE)"
		}
		lead := c.lead.String()
		if c.leadFio {
			lead = "fio's start-up"
		}
		fmt.Printf("bench-io fio_version=%s fio_ioengine=%s file=%s runtime=%s ramp=%s lead=%s rbctl: rings=%d ring=%s submitters=%d batch=%d device-batch=%d fixed=%v; buffers: %s; settle=%v\n",
			strings.TrimSpace(string(out)), c.fioEngine, c.file, c.runtime, c.ramp, lead, c.rings, c.ring, c.submitters, c.batch, c.deviceBatch, c.fixed, pages, c.settle)
	} else {
		pages := "huge pages (Alloc with THP)"
		if c.fioMem == "malloc" {
			pages = "4 KiB pages (-fio-mem malloc: MADV_NOHUGEPAGE)"
		}
		fmt.Printf("bench-io without fio file=%s runtime=%s ramp=%s rbctl: rings=%d ring=%s submitters=%d batch=%d device-batch=%d fixed=%v; buffers: %s; settle=%v\n",
			c.file, c.runtime, c.ramp, c.rings, c.ring, c.submitters, c.batch, c.deviceBatch, c.fixed, pages, c.settle)
	}
	fmt.Println(handoff.MachineLine("bench-io", "before the runs", handoff.Probe()))
	failed := false
	var rows []row
	for _, bsStr := range strings.Split(bsList, ",") {
		bs, err := parseSize(bsStr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchio:", err)
			os.Exit(2)
		}
		for _, rw := range strings.Split(rwList, ",") {
			r, bad := runCase(c, bs, rw)
			rows = append(rows, r...)
			failed = failed || bad
		}
	}
	printSummary(rows, 0.95)
	fmt.Println(handoff.MachineLine("bench-io", "after the runs", handoff.Probe()))
	if failed {
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(1)
	}
}

// parseSize reads a block size as units.ParseSize does ("64K", "1MiB"), at most 1 GiB.
func parseSize(s string) (int, error) {
	n, err := units.ParseSize(strings.TrimSpace(s))
	if err != nil || n <= 0 || n > 1<<30 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int(n), nil
}

func sizeName(n int) string {
	return strings.ReplaceAll(units.FormatExact(int64(n)), " ", "") // one token: bs=64KiB
}

// fioJob is one fio job: bs-sized random transfers; with align > 0, at offset + k·align
// (fio's --offset and --blockalign), else at multiples of bs.
type fioJob struct {
	bs, offset, align int
	write, fixed      bool
	iolog             string // replay these writes instead (--read_iolog; replay.go)
}

// payloadJob reads what an engine load of a bs-byte slot reads: the payload after the
// slot's header, in every bs-aligned block.
func payloadJob(bs int, fixed bool) fioJob {
	hb := int(engine.DefaultConfig().HeaderBytes)
	return fioJob{bs: bs - hb, offset: hb, align: bs, fixed: fixed}
}

// fioRun runs one fio job (io_uring, O_DIRECT, random, time based) and returns bytes/s.
// j.fixed adds --fixedbufs --registerfiles (the registered buffers and files rbctl uses).
func fioRun(c config, j fioJob) (result, error) {
	if c.fioEngine != "io_uring" && j.fixed {
		return result{}, fmt.Errorf("fio --ioengine=%s has no fixedbufs", c.fioEngine)
	}
	write := j.write
	rw := "randread"
	if write {
		rw = "randwrite"
	}
	args := []string{
		"--name=benchio", "--ioengine=" + c.fioEngine, "--direct=1",
		"--bs=" + strconv.Itoa(j.bs), "--iodepth=" + strconv.Itoa(c.qd), "--numjobs=1",
		fmt.Sprintf("--runtime=%dms", c.runtime.Milliseconds()),
		fmt.Sprintf("--ramp_time=%dms", c.ramp.Milliseconds()),
		"--output-format=json", "--mem=" + c.fioMem,
	}
	if j.iolog != "" {
		// The log names the file; fio refuses --registerfiles with a replayed file set.
		args = append(args, "--read_iolog="+j.iolog, "--replay_no_stall=1")
		if j.fixed {
			args = append(args, "--fixedbufs")
		}
	} else {
		args = append(args, "--filename="+c.file, "--rw="+rw, "--time_based", "--norandommap", "--randrepeat=0")
		if j.fixed {
			args = append(args, "--fixedbufs", "--registerfiles")
		}
	}
	if j.align > 0 {
		args = append(args, "--offset="+strconv.Itoa(j.offset), "--blockalign="+strconv.Itoa(j.align))
	}
	// The disk's counters are read inside fio's measured window, as closely as a process
	// started from here can tell: from ramp+50 ms after the start to 50 ms before the end.
	cmd := exec.Command(c.fio, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	statPath := diskStatPath(c.file)
	launch := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	// fio's first I/O comes after its start-up, which the last runs measured (c.lead).
	edge := 50 * time.Millisecond
	time.Sleep(c.lead + c.ramp + edge)
	d0, ok0 := readDiskStat(statPath)
	t0 := time.Now()
	time.Sleep(max(c.runtime-2*edge, edge))
	d1, ok1 := readDiskStat(statPath)
	window := time.Since(t0)
	err := cmd.Wait()
	out := []byte(stdout.String())
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		return result{}, fmt.Errorf("%v: %s", err, msg)
	}
	// fio may print warnings before the JSON document.
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	var res struct {
		Timestamp int64 `json:"timestamp_ms"` // when fio wrote its report, after the job ended
		Jobs      []struct {
			Read    fioDir  `json:"read"`
			Write   fioDir  `json:"write"`
			Usr     float64 `json:"usr_cpu"` // percent of the job's run time
			Sys     float64 `json:"sys_cpu"`
			Runtime int64   `json:"job_runtime"` // ms, the measured part (after the ramp)
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		return result{}, fmt.Errorf("parsing fio JSON: %v", err)
	}
	jr := res.Jobs[0]
	dir := jr.Read
	if write {
		dir = jr.Write
	}
	bw := dir.BwBytes
	r := result{bw: bw, depth: dir.IOPS * dir.Lat.Mean / 1e9}
	r.startup = fioStartup(launch, res.Timestamp, jr.Runtime, c.ramp)
	if ok0 && ok1 {
		r.disk = diffDisk(d0, d1, write, int64(bw*window.Seconds()))
	}
	if bw > 0 {
		r.cpuPerGB = (jr.Usr + jr.Sys) / 100 / (bw / 1e9)
	}
	return r, nil
}

// fioDir is the part of fio's JSON for one direction that benchio reads.
type fioDir struct {
	BwBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	Lat     struct {
		Mean float64 `json:"mean"` // submission to completion, ns
	} `json:"lat_ns"`
}

// result is one run's throughput (bytes/s), CPU seconds (user+system) per GB moved, and
// mean ops in flight over the measured window (rbctl: the rings' occupancy integral; fio:
// IOPS × mean latency, Little's law; 0: not measured).
type result struct {
	bw, cpuPerGB, depth float64
	disk                diskDelta     // what the disk received per MiB moved (diskstat.go)
	startup             time.Duration // fio: from its launch to its first I/O (fioStartup; 0: not known)
}

// fioStartup estimates how long fio took from its launch to its first I/O: the time of its
// report (timestamp_ms, written after the job) less the job's measured runtime and its ramp.
// The report's own few milliseconds after the job count as start-up, so the estimate errs
// long by them. 0 when fio gave no timestamp or the figures do not add up.
func fioStartup(launch time.Time, reportMs, runtimeMs int64, ramp time.Duration) time.Duration {
	if reportMs <= 0 || runtimeMs <= 0 {
		return 0
	}
	d := time.UnixMilli(reportMs).Sub(launch) - time.Duration(runtimeMs)*time.Millisecond - ramp
	if d <= 0 || d > time.Minute {
		return 0
	}
	return d
}

// parseLead reads -lead: "fio", or a duration of at least 0.
func parseLead(c *config, v string) error {
	if v == "fio" {
		c.leadFio = true
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("-lead %q: want fio or a duration such as 0 or 500ms", v)
	}
	c.lead = d
	return nil
}

// meanDepth is the mean ops in flight between two occupancy readings.
func meanDepth(a, b uring.Occupancy) float64 {
	if b.ElapsedNs <= a.ElapsedNs {
		return 0
	}
	return float64(b.InflightNs-a.InflightNs) / float64(b.ElapsedNs-a.ElapsedNs)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// uringOptions is the ring setup -ring selects, shared by the device and engine runs.
func uringOptions(c config) (blockdev.UringOptions, error) {
	uopt := blockdev.UringOptions{QueueDepth: c.qd, Rings: c.rings}
	switch c.ring {
	case "default":
	case "plain":
		uopt.Ring = &uring.Options{}
	case "single":
		uopt.Ring = &uring.Options{SingleIssuer: true, BestEffort: true}
	case "defer":
		uopt.Ring = &uring.Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}
	case "defer-kwait":
		uopt.Ring = &uring.Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true, KernelWait: true}
	case "coop":
		uopt.Ring = &uring.Options{CoopTaskrun: true, BestEffort: true}
	case "sqpoll":
		uopt.Ring = &uring.Options{SQPoll: true, SQPollIdle: 10 * time.Millisecond}
	default:
		return uopt, fmt.Errorf("unknown -ring %q", c.ring)
	}
	return uopt, nil
}

// rbctlRun drives the io_uring device with slot-sized ops and returns bytes/s.
func rbctlRun(c config, bs int, write bool) (result, error) {
	batch := c.deviceBatch
	d, pool, closePool, err := openPool(c, c.submitters*batch*bs, [32]byte{byte(bs), byte(c.qd)})
	if err != nil {
		return result{}, err
	}
	defer closePool()
	slots := d.Info().Size / int64(bs)
	if slots < int64(batch) {
		return result{}, fmt.Errorf("%s holds %d slots of %d bytes; need at least %d", c.file, slots, bs, batch)
	}
	var (
		st runState
		wg sync.WaitGroup
	)
	time.Sleep(c.lead)
	for s := 0; s < c.submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), uint64(time.Now().UnixNano())))
			mine := pool[s*batch*bs : (s+1)*batch*bs]
			ops := make([]blockdev.Op, batch)
			for !st.stop.Load() {
				for i := range ops {
					slot := rng.Int64N(slots)
					buf := mine[i*bs : (i+1)*bs]
					if write { // slot header as the engine lays it out
						copy(buf, "LMCBLK01")
						binary.LittleEndian.PutUint64(buf[8:], uint64(slot)*0x9E3779B97F4A7C15)
						binary.LittleEndian.PutUint64(buf[16:], uint64(bs-4096))
					}
					ops[i] = blockdev.Op{Write: write, Off: slot * int64(bs), Buf: buf, Handle: placement.None}
				}
				if err := d.Submit(ops); err != nil {
					st.fail(err)
					return
				}
				st.bytes.Add(int64(batch * bs))
			}
		}()
	}
	w := measure(c, &st, d.Occupancy, nil)
	wg.Wait()
	if st.err != nil {
		return result{}, st.err
	}
	if n := d.Stats().PlainOps; c.fixed && n > 0 {
		return result{}, fmt.Errorf("%d ops missed the registered pool", n)
	}
	return w.result(write), nil
}
