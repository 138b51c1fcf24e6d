// Command respbench measures a RESP server's SET and GET throughput of large values against
// a reference server in the same run (make bench-resp: rbctl serve --resp against
// valkey-server): the same client, the same keys — LMCache's native key spelling, which
// rbctl takes and valkey stores as any string — the same values, rounds alternating which
// server goes first. It reports each round, the median ratio (target / reference) per
// operation and value size, and each server's CPU seconds per GB moved (from
// /proc/PID/stat, when -pid and -ref-pid are given), and each server's per-request latency
// percentiles (p50, p99, p99.9: from the request's write to its reply's last byte, pooled
// over the rounds), the clients' own CPU seconds per GB (this process's) and how busy the
// machine's CPUs were in each server's phases (/proc/stat): with clients and servers on one
// machine, a row whose CPUs are all busy is bounded by CPU, not by the disk or the server's
// waits. Each row is a client pattern, CxP: C connections with P requests in
// flight each; the default rows are -clients x -pipeline (16x4) and LMCache's own client
// (8x1: its resp adapter keeps 8 connections with one command in flight each, distinct
// keys). Every GET is checked: length and the value's first and last bytes, which encode
// the key.
//
// With -disk-file (rbctl's cache file), each round also measures what the disk itself gives
// the GET pattern, right after rbctl's GETs: fio reading as many bytes as the GETs moved, in
// reads of the value size at random offsets of the file (O_DIRECT through io_uring), at the
// row's depth (clients × pipeline). valkey answers from RAM; rbctl reads every GET from the
// disk, so where the disk's rate is below valkey's, rbctl/valkey cannot reach 1 and
// rbctl/disk says how close the server comes to the device. A row of several clients also
// gets fio in the clients' own pattern (one job per client, each at the row's pipeline
// depth: the "disk-jobs" lines): for LMCache's 8x1 that is 8 readers with one read in
// flight each, which the disk serves more slowly than one reader at depth 8, and
// disk-jobs/valkey says whether the disk alone, with no network at all, reaches valkey.
//
// With -disk-scratch (a file beside the cache, overwritten), each round also measures what
// the disk gives the SET pattern: fio writing as many bytes as the SETs moved, in random
// O_DIRECT writes of the value size, one job per client at its pipeline depth (the
// "disk-write-jobs" lines). rbctl answers a SET once its value is on the disk; valkey once it
// is in RAM.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rbctl/rbctl/internal/handoff"
	"github.com/rbctl/rbctl/internal/sys"
)

type target struct {
	name, addr string
	pid        int
}

func main() {
	var t, ref target
	flag.StringVar(&t.addr, "addr", "127.0.0.1:6390", "the server measured (rbctl serve --resp)")
	flag.IntVar(&t.pid, "pid", 0, "its process id, for CPU per GB (0: not measured)")
	flag.StringVar(&ref.addr, "ref", "127.0.0.1:6391", "the reference server (valkey-server)")
	flag.IntVar(&ref.pid, "ref-pid", 0, "its process id, for CPU per GB (0: not measured)")
	sizes := flag.String("sizes", "256K,1M", "value sizes")
	clients := flag.Int("clients", 16, "connections")
	pipeline := flag.Int("pipeline", 4, "requests in flight per connection")
	total := flag.Int64("bytes", 1<<30, "bytes SET (then GET) per size, round and server")
	rounds := flag.Int("rounds", 3, "rounds per size")
	rowsFlag := flag.String("rows", "", "client patterns CxP, comma-separated (default: -clients x -pipeline, then LMCache's 8x1)")
	diskFile := flag.String("disk-file", "", "rbctl's cache file: measure the disk's own rate for each GET pattern with fio ('' to skip)")
	fioBin := flag.String("fio", "fio", "fio binary for -disk-file and -disk-scratch")
	scratch := flag.String("disk-scratch", "", "a scratch file on the cache file's filesystem (overwritten): measure the disk's own write rate for each SET pattern with fio ('' to skip)")
	flag.StringVar(&t.name, "name", "rbctl", "the measured server's name in the output")
	flag.StringVar(&ref.name, "ref-name", "valkey", "the reference's name in the output (another rbctl serve, for an A/B of two builds or flags: scripts/resp-ab.sh)")
	flag.Parse()
	if t.name == "" || ref.name == "" || t.name == ref.name {
		fail(errors.New("-name and -ref-name must be two different, non-empty names"))
	}
	if *clients < 1 || *pipeline < 1 || *rounds < 1 || *total < 1 {
		fail(errors.New("-clients, -pipeline, -rounds and -bytes must be positive"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, err := parseRows(*rowsFlag, *clients, *pipeline)
	if err != nil {
		fail(err)
	}
	if *diskFile != "" {
		if _, err := os.Stat(*diskFile); err != nil {
			fail(fmt.Errorf("-disk-file: %w", err))
		}
		if _, err := exec.LookPath(*fioBin); err != nil {
			fail(fmt.Errorf("-disk-file needs fio: %w", err))
		}
	}
	if *scratch != "" {
		if err := checkScratch(*scratch, *diskFile); err != nil {
			fail(err)
		}
		if _, err := exec.LookPath(*fioBin); err != nil {
			fail(fmt.Errorf("-disk-scratch needs fio: %w", err))
		}
	}
	if len(rows) > 3 {
		fail(errors.New("-rows: at most 3 rows (each round's keys carry the row in one hex digit pair)"))
	}
	handOff("before the phases")
	defer handOff("after the phases")
	for _, s := range strings.Split(*sizes, ",") {
		size, err := parseSize(s)
		if err != nil {
			fail(err)
		}
		for ri, row := range rows {
			n := int(max(*total/int64(size), int64(row.clients)))
			ratios := map[string][]float64{}
			cpu := map[string][]float64{}
			clientCPU := map[string][]float64{} // this process's (the clients') CPU s/GB in each server's phases
			busy := map[string][]float64{}      // the machine's CPUs busy in each server's phases, percent
			lat := map[string][]time.Duration{}
			var disk []float64     // rbctl's GET rate ÷ the disk's, per round
			var diskJobs []float64 // rbctl's GET rate ÷ the disk's in the clients' own pattern
			var jobsRef []float64  // the disk's rate in the clients' pattern ÷ valkey's GET rate
			var serial []float64   // rbctl's GET rate ÷ the read-then-send model's (readThenSend)
			var serialRef []float64
			var wjobs, wjobsRef []float64 // rbctl's SET rate ÷ the disk's writes in the clients' pattern; those ÷ valkey's SET
			var st stages                 // where rbctl's GET time goes (stages.go)
			for r := 0; r < *rounds; r++ {
				order := []target{t, ref}
				if r%2 == 1 {
					order = []target{ref, t}
				}
				rate := map[string]float64{}
				for ti, tg := range order {
					id := 0xaa + 0x11*((ti+r)%2) + 0x22*ri // hex, so that the key's hash field stays hex
					prefix := fmt.Sprintf("%02x%02x%04x", id, r, (size>>10)&0xffff)
					for _, op := range []string{"SET", "GET"} {
						timed := tg.name == t.name && op == "GET"
						var s0 sample
						if timed {
							s0 = takeSample(ctx, tg.addr, *diskFile)
						}
						c0, me0 := cpuTicks(tg.pid), cpuTicks(os.Getpid())
						b0, t0, m0 := sys.MachineTicks()
						gbps, l, err := phase(ctx, tg.addr, op, prefix, n, size, row.clients, row.pipeline)
						if err != nil {
							fail(fmt.Errorf("%s %s %s %s round %d: %w", tg.name, op, s, row, r+1, err))
						}
						if timed {
							st.add(s0, takeSample(ctx, tg.addr, *diskFile), l)
						}
						rate[tg.name+op] = gbps
						lat[tg.name+op] = append(lat[tg.name+op], l...)
						gb := float64(n) * float64(size) / 1e9
						if c1 := cpuTicks(tg.pid); c0 >= 0 && c1 >= 0 {
							secs := float64(c1-c0) / 100 // USER_HZ
							cpu[tg.name+op] = append(cpu[tg.name+op], secs/gb)
						}
						if me1 := cpuTicks(os.Getpid()); me0 >= 0 && me1 >= 0 {
							clientCPU[tg.name+op] = append(clientCPU[tg.name+op], float64(me1-me0)/100/gb)
						}
						if b1, t1, m1 := sys.MachineTicks(); m0 && m1 && t1 > t0 {
							busy[tg.name+op] = append(busy[tg.name+op], 100*float64(b1-b0)/float64(t1-t0))
						}
						fmt.Printf("  size %s %s round %d %-6s %s: %.2f GB/s\n", s, row, r+1, tg.name, op, gbps)
					}
					// fio runs the disk's own pattern right after rbctl's phases; it stops the
					// bench with fio's error.
					fio := func(file, what string, run func() (float64, error)) float64 {
						v, err := run()
						if err != nil {
							fail(fmt.Errorf("fio on %s, %s %s round %d: %w", file, s, row, r+1, err))
						}
						fmt.Printf("  size %s %s round %d disk   %s: %.2f GB/s\n", s, row, r+1, what, v)
						return v
					}
					moved := int64(n) * int64(size)
					if tg.name == t.name && *diskFile != "" {
						gbps := fio(*diskFile, fmt.Sprintf("read (fio, depth %d)", row.clients*row.pipeline), func() (float64, error) {
							return diskRead(ctx, *fioBin, *diskFile, moved, size, 1, row.clients*row.pipeline)
						})
						disk = append(disk, rate[t.name+"GET"]/gbps)
						if row.clients > 1 {
							jb := fio(*diskFile, fmt.Sprintf("read (fio, %d jobs at depth %d)", row.clients, row.pipeline), func() (float64, error) {
								return diskRead(ctx, *fioBin, *diskFile, moved, size, row.clients, row.pipeline)
							})
							rate["diskjobs"] = jb
							diskJobs = append(diskJobs, rate[t.name+"GET"]/jb)
						}
					}
					if tg.name == t.name && *scratch != "" {
						wb := fio(*scratch, fmt.Sprintf("write (fio, %d jobs at depth %d)", row.clients, row.pipeline), func() (float64, error) {
							return diskWrite(ctx, *fioBin, *scratch, moved, size, row.clients, row.pipeline)
						})
						rate["diskwrite"] = wb
						wjobs = append(wjobs, rate[t.name+"SET"]/wb)
					}
				}
				for _, op := range []string{"SET", "GET"} {
					ratios[op] = append(ratios[op], rate[t.name+op]/rate[ref.name+op])
				}
				if wb, ok := rate["diskwrite"]; ok {
					wjobsRef = append(wjobsRef, wb/rate[ref.name+"SET"])
				}
				if jb, ok := rate["diskjobs"]; ok {
					jobsRef = append(jobsRef, jb/rate[ref.name+"GET"])
					if row.pipeline == 1 {
						m := readThenSend(jb, rate[ref.name+"GET"])
						serial = append(serial, rate[t.name+"GET"]/m)
						serialRef = append(serialRef, m/rate[ref.name+"GET"])
					}
				}
			}
			if len(disk) > 0 {
				fmt.Printf("resp-bench GET %s clients=%d pipeline=%d: ratio rbctl/disk median %.2f (rounds %s); the disk: fio random reads of %s at depth %d on rbctl's cache file\n",
					s, row.clients, row.pipeline, median(disk), list(disk), s, row.clients*row.pipeline)
			}
			if len(diskJobs) > 0 {
				fmt.Printf("resp-bench GET %s clients=%d pipeline=%d: ratio rbctl/disk-jobs median %.2f (rounds %s), disk-jobs/valkey median %.2f (rounds %s); disk-jobs: fio, %d jobs each reading %s at depth %d (the clients' own pattern, no network)\n",
					s, row.clients, row.pipeline, median(diskJobs), list(diskJobs), median(jobsRef), list(jobsRef), row.clients, s, row.pipeline)
			}
			if len(wjobs) > 0 {
				fmt.Printf("resp-bench SET %s clients=%d pipeline=%d: ratio rbctl/disk-write-jobs median %.2f (rounds %s), disk-write-jobs/valkey median %.2f (rounds %s); disk-write-jobs: fio, %d jobs each writing %s at depth %d to a scratch file beside the cache (the clients' own pattern, no network)\n",
					s, row.clients, row.pipeline, median(wjobs), list(wjobs), median(wjobsRef), list(wjobsRef), row.clients, s, row.pipeline)
			}
			if len(serial) > 0 {
				fmt.Printf("resp-bench GET %s clients=%d pipeline=%d: ratio rbctl/read-then-send median %.2f (rounds %s), read-then-send/valkey median %.2f (rounds %s); read-then-send: a model, not a run: each connection's GET takes the disk's time per read in the clients' pattern (disk-jobs) plus valkey's time per GET, one after the other\n",
					s, row.clients, row.pipeline, median(serial), list(serial), median(serialRef), list(serialRef))
			}
			if line := st.String(); line != "" {
				fmt.Printf("resp-bench GET %s clients=%d pipeline=%d: where rbctl's GET time goes, means over the rounds: %s\n", s, row.clients, row.pipeline, line)
			}
			if cycle, measured, ok := st.direct(); ok && row.pipeline == 1 && len(ratios["GET"]) > 0 {
				fmt.Printf("resp-bench GET %s clients=%d pipeline=1: direct/valkey %.2f, direct/rbctl %.2f; direct: a model, not a run: rbctl with no time in the server but the disk's own per read and the reply's write (the kernel's and the server's counters above), everything outside the server as measured: %.0f µs per GET against %.0f\n",
					s, row.clients, median(ratios["GET"])*measured/cycle, measured/cycle, cycle, measured)
			}
			for _, op := range []string{"SET", "GET"} {
				fmt.Printf("resp-bench %s %s clients=%d pipeline=%d: ratio %s/%s median %.2f (rounds %s); CPU s/GB %s %s, %s %s; latency p50/p99/p99.9 %s %s, %s %s; clients' CPU s/GB with %s %s, with %s %s; machine's CPUs busy with %s %s %%, with %s %s %%\n",
					op, s, row.clients, row.pipeline, t.name, ref.name, median(ratios[op]), list(ratios[op]), t.name, medianOr(cpu[t.name+op]), ref.name, medianOr(cpu[ref.name+op]),
					t.name, percentiles(lat[t.name+op]), ref.name, percentiles(lat[ref.name+op]),
					t.name, medianOr(clientCPU[t.name+op]), ref.name, medianOr(clientCPU[ref.name+op]),
					t.name, percentOr(busy[t.name+op]), ref.name, percentOr(busy[ref.name+op]))
			}
		}
	}
}

// handOff prints the machine's load and hand-off latency (handoff.Probe: at most 0.5 s):
// with two CPUs, a multi-threaded server waits that long for its second CPU in a
// latency-bound row, and a one-thread server (valkey) never does (docs/resp.md, "The
// machine's hand-off latency").
func handOff(when string) {
	fmt.Println(handoff.MachineLine("resp-bench", when, handoff.Probe()))
}

// readThenSend is the GET rate of a model server that, on every connection with one GET in
// flight, reads the value from the disk and then sends it, as rbctl does (the CRC is checked
// before the first byte goes out): a GET takes the disk's time per read in the clients'
// pattern plus the reference server's time per GET from RAM, so the rates (same clients,
// same sizes) add as 1/(1/disk + 1/ref). It is a model of the two measured rates, not a
// measurement: the disk may read faster while fewer reads are in flight.
func readThenSend(disk, ref float64) float64 {
	if disk <= 0 || ref <= 0 {
		return 0
	}
	return 1 / (1/disk + 1/ref)
}

// row is a client pattern: clients connections with pipeline requests in flight each.
type row struct{ clients, pipeline int }

func (r row) String() string { return fmt.Sprintf("%dx%d", r.clients, r.pipeline) }

// parseRows reads "16x4,8x1"; "" is clients x pipeline and then LMCache's 8x1 (once).
func parseRows(s string, clients, pipeline int) ([]row, error) {
	if s == "" {
		rows := []row{{clients, pipeline}}
		if clients != 8 || pipeline != 1 {
			rows = append(rows, row{8, 1})
		}
		return rows, nil
	}
	var rows []row
	for _, f := range strings.Split(s, ",") {
		c, p, ok := strings.Cut(f, "x")
		ci, err1 := strconv.Atoi(c)
		pi, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || ci < 1 || pi < 1 {
			return nil, fmt.Errorf("-rows: %q is not CxP (e.g. 16x4)", f)
		}
		rows = append(rows, row{ci, pi})
	}
	return rows, nil
}

// percentiles is "p50/p99/p99.9" of d in milliseconds.
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f ms", at(0.50), at(0.99), at(0.999))
}

// phase runs n requests of op (SET then GET use the same keys) over clients connections,
// pipeline requests in flight on each, and returns GB/s of values moved and each request's
// latency.
func phase(ctx context.Context, addr, op, prefix string, n, size, clients, pipeline int) (float64, []time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	lats := make([][]time.Duration, clients)
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := client(ctx, addr, op, prefix, c, clients, n, size, pipeline)
			if err != nil {
				errs <- err
			}
			lats[c] = l
		}()
	}
	wg.Wait()
	gbps := float64(n) * float64(size) / time.Since(start).Seconds() / 1e9
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return gbps, all, nil
}

// key is LMCache's native spelling of chunk i: model@rank@group@hash@salt.
func key(prefix string, i int) string {
	return fmt.Sprintf("bench/model@00000000@0@%s%08x@bench", prefix, i)
}

// value is size bytes whose first and last 8 bytes hold i.
func fill(v []byte, i int) {
	binary.LittleEndian.PutUint64(v, uint64(i))
	binary.LittleEndian.PutUint64(v[len(v)-8:], uint64(i))
}

// client runs its share of the phase on one connection and returns each request's latency:
// from when it is written into the connection's buffer (sent at once when nothing else is
// in flight: pipeline 1) to the end of its reply.
func client(ctx context.Context, addr, op, prefix string, c, clients, n, size, pipeline int) ([]time.Duration, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	w := bufio.NewWriterSize(conn, 1<<20)
	r := bufio.NewReaderSize(conn, 1<<20)
	val := make([]byte, size)
	var mine []int
	for i := c; i < n; i += clients {
		mine = append(mine, i)
	}
	sentAt := make([]time.Time, len(mine))
	lat := make([]time.Duration, 0, len(mine))
	sent, got := 0, 0
	for got < len(mine) {
		for sent < len(mine) && sent-got < pipeline {
			sentAt[sent] = time.Now()
			i := mine[sent]
			k := key(prefix, i)
			if op == "SET" {
				fill(val, i)
				fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(k), k, size)
				w.Write(val)
				w.WriteString("\r\n")
			} else {
				fmt.Fprintf(w, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k)
			}
			sent++
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
		if err := reply(r, op, mine[got], size, val); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(sentAt[got]))
		got++
	}
	return lat, nil
}

// reply reads one reply and checks it: +OK for SET, the value of chunk i for GET.
func reply(r *bufio.Reader, op string, i, size int, buf []byte) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	if op == "SET" {
		if line != "+OK" {
			return fmt.Errorf("SET of chunk %d: %q", i, line)
		}
		return nil
	}
	if !strings.HasPrefix(line, "$") {
		return fmt.Errorf("GET of chunk %d: %q", i, line)
	}
	l, err := strconv.Atoi(line[1:])
	if err != nil || l != size {
		return fmt.Errorf("GET of chunk %d: %q, want $%d", i, line, size)
	}
	if _, err := io.ReadFull(r, buf[:size]); err != nil {
		return err
	}
	if binary.LittleEndian.Uint64(buf) != uint64(i) || binary.LittleEndian.Uint64(buf[size-8:]) != uint64(i) {
		return fmt.Errorf("GET of chunk %d: another chunk's bytes", i)
	}
	_, err = r.Discard(2)
	return err
}

func cpuTicks(pid int) int64 { return sys.CPUTicks(pid) }

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n*mult < 16 {
		return 0, fmt.Errorf("size %q: want e.g. 256K or 1M (at least 16 bytes)", s)
	}
	return n * mult, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOr(v []float64) string {
	if len(v) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.3f", median(v))
}

// percentOr is the median of percentages, with no decimals; "not measured" when none.
func percentOr(v []float64) string {
	if len(v) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.0f", median(v))
}

func list(v []float64) string {
	p := make([]string, len(v))
	for i, x := range v {
		p[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(p, " ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "respbench:", err)
	os.Exit(1)
}

// checkScratch refuses a -disk-scratch file that does not exist (fio would lay it out first,
// writing it whole) or that is the cache file itself (cache; fio would overwrite rbctl's
// cache under the running server).
func checkScratch(scratch, cache string) error {
	st, err := os.Stat(scratch)
	if err != nil {
		return fmt.Errorf("-disk-scratch: %w (make it first, as large as the bytes SET per round)", err)
	}
	if cache != "" {
		if ct, err := os.Stat(cache); err == nil && os.SameFile(st, ct) {
			return fmt.Errorf("-disk-scratch %s is the cache file given as -disk-file: fio's writes would overwrite rbctl's cache", scratch)
		}
	}
	return nil
}

// diskRead runs fio reading total bytes from file in random reads of size, jobs jobs (each
// its own io_uring, O_DIRECT, read-only) at depth each, and returns the group's GB/s: one
// job at the row's whole depth, or one per client at its pipeline depth (the clients' own
// pattern).
func diskRead(ctx context.Context, fio, file string, total int64, size, jobs, depth int) (float64, error) {
	return runFio(ctx, fio, "read", total, size, jobs, depth, "--filename="+file, "--readonly", "--rw=randread")
}

// diskWrite runs fio writing total bytes to file (which must exist: fio would lay it out
// first) in random O_DIRECT writes of size, jobs jobs at depth each, and returns the group's
// GB/s: what the disk alone gives a SET pattern, each SET being one write of its value.
func diskWrite(ctx context.Context, fio, file string, total int64, size, jobs, depth int) (float64, error) {
	st, err := os.Stat(file)
	if err != nil {
		return 0, err
	}
	span := st.Size() / int64(size) * int64(size)
	if span < int64(size) {
		return 0, fmt.Errorf("%s holds less than one %d-byte write", file, size)
	}
	return runFio(ctx, fio, "write", total, size, jobs, depth, "--filename="+file, fmt.Sprintf("--size=%d", span), "--rw=randwrite")
}

// runFio runs one fio job group of total bytes in requests of size, jobs jobs (io_uring,
// O_DIRECT) at depth each, with args for the file and direction, and returns the group's
// GB/s in dir ("read" or "write").
func runFio(ctx context.Context, fio, dir string, total int64, size, jobs, depth int, args ...string) (float64, error) {
	per := max(total/int64(jobs)/int64(size), 1) * int64(size)
	args = append([]string{"--name=disk"}, args...)
	args = append(args, "--ioengine=io_uring", "--direct=1", fmt.Sprintf("--bs=%d", size),
		fmt.Sprintf("--numjobs=%d", jobs), "--group_reporting",
		fmt.Sprintf("--iodepth=%d", depth), fmt.Sprintf("--io_size=%d", per), "--output-format=json")
	cmd := exec.CommandContext(ctx, fio, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return fioGBps(out, dir)
}

// fioReadGBps is the read rate of the first job of fio's JSON output (with
// --group_reporting, the group's).
func fioReadGBps(out []byte) (float64, error) { return fioGBps(out, "read") }

// fioGBps is the rate of the first job's dir ("read" or "write") in fio's JSON output.
func fioGBps(out []byte, dir string) (float64, error) {
	// fio may print notes before its JSON.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	type rate struct {
		BwBytes float64 `json:"bw_bytes"`
	}
	var r struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("fio output: %w", err)
	}
	var got rate
	if len(r.Jobs) > 0 {
		if raw, ok := r.Jobs[0][dir]; ok {
			if err := json.Unmarshal(raw, &got); err != nil {
				return 0, fmt.Errorf("fio output: %w", err)
			}
		}
	}
	if got.BwBytes <= 0 {
		return 0, fmt.Errorf("fio output: no %s rate", dir)
	}
	return got.BwBytes / 1e9, nil
}
