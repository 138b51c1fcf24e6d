// Command restartbench measures how long `rbctl serve` takes from its start to the first GET
// it answers, on a cache of millions of entries (issue 37; docs/engine.md, "Restart time").
//
//	restartbench fill -dev IMG -n 4194304        # put N small entries into a formatted cache
//	restartbench time -rbctl BIN -dev IMG -stop int|kill [-cold]
//	restartbench open -dev IMG [-cpuprofile FILE] [-cold]   # cache.Open alone, as serve opens
//
// fill puts N LMCache object keys (entry i: key Key(i), an 8-byte payload) through the engine
// in batches, then closes it with its final checkpoint: far faster than N RESP SETs, and the
// file stays sparse (each put writes one slot header and one block). time starts
// `rbctl serve IMG --resp ADDR --listen ADDR`, asks RESP GET and gRPC Get for Key(0) every
// millisecond until each answers with its payload, prints both delays, SETs a few keys and
// stops the server with SIGINT (a clean shutdown: final checkpoint) or SIGKILL (the next
// start recovers from the last periodic checkpoint). -cold drops the image from the page
// cache before the start.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/p2p/client"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: restartbench fill|time|open [flags]"))
	}
	var err error
	switch os.Args[1] {
	case "fill":
		err = fill(os.Args[2:])
	case "time":
		err = timeRestart(os.Args[2:])
	case "open":
		err = openOnly(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: want fill, time or open", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "restartbench:", err)
	os.Exit(1)
}

// Key is entry i's key: a 26-byte model name, 4 ranks, a 32-byte chunk hash, 8 tenants.
func Key(i int) engine.Key {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	h := sha256.Sum256(b[:])
	return engine.ObjectKey("meta-llama/Llama-3.1-8B-Instruct", uint32(i%4), h[:], fmt.Sprintf("tenant-%d", i%8))
}

func payload(i int) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i)^0x5a5a5a5a)
	return b[:]
}

// serveDevice is how rbctl serve opens a device by default (io_uring, O_DIRECT, buffered
// only where the filesystem refuses O_DIRECT); read-only for open, which writes nothing.
func serveDevice(readOnly bool) devices.Options {
	o := devices.DefaultOptions()
	o.ReadOnly, o.Exclusive, o.BufferedFallback = readOnly, !readOnly, true
	return o
}

func fill(args []string) error {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	dev := fs.String("dev", "", "formatted cache image (rbctl format)")
	n := fs.Int("n", 1<<20, "entries to put")
	from := fs.Int("from", 0, "first entry number")
	_ = fs.Parse(args)
	if err := needDev(*dev, fs); err != nil {
		return err
	}
	if *n <= 0 || *from < 0 {
		return fmt.Errorf("-n %d -from %d: want -n > 0 and -from >= 0", *n, *from)
	}
	e, err := cache.Open(*dev, cache.OpenOptions{Device: serveDevice(false)})
	if err != nil {
		return err
	}
	const batch = 256
	keys := make([]engine.Key, 0, batch)
	vals := make([][]byte, 0, batch)
	t0 := time.Now()
	for lo := *from; lo < *from+*n; lo += batch {
		keys, vals = keys[:0], vals[:0]
		for i := lo; i < min(lo+batch, *from+*n); i++ {
			keys = append(keys, Key(i))
			vals = append(vals, payload(i))
		}
		r, err := e.PutMany(keys, vals)
		if err != nil {
			e.CloseNoCheckpoint()
			return err
		}
		if len(r.Stored) != len(keys) {
			e.CloseNoCheckpoint()
			return fmt.Errorf("batch at %d: %d of %d stored (cache full?)", lo, len(r.Stored), len(keys))
		}
		if (lo-*from)%(1<<18) == 0 {
			fmt.Fprintf(os.Stderr, "%d entries, %.0f s\n", lo-*from, time.Since(t0).Seconds())
		}
	}
	if err := e.Close(); err != nil {
		return err
	}
	fmt.Printf("filled %d entries in %.1f s\n", *n, time.Since(t0).Seconds())
	return nil
}

func timeRestart(args []string) error {
	fs := flag.NewFlagSet("time", flag.ExitOnError)
	bin := fs.String("rbctl", "rbctl", "the rbctl binary")
	dev := fs.String("dev", "", "filled cache image")
	respAddr := fs.String("resp", "127.0.0.1:16390", "RESP listen address")
	grpcAddr := fs.String("listen", "127.0.0.1:17470", "gRPC listen address")
	stop := fs.String("stop", "int", "how to stop the server after: int (clean shutdown) or kill (SIGKILL)")
	cold := fs.Bool("cold", false, "drop the image from the page cache first")
	limit := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	extra := fs.String("serve-args", "", "more rbctl serve arguments, space-separated (e.g. --eviction none)")
	_ = fs.Parse(args)
	if err := needDev(*dev, fs); err != nil {
		return err
	}
	if *stop != "int" && *stop != "kill" {
		return fmt.Errorf("-stop %q: want int or kill", *stop)
	}
	if *limit <= 0 {
		return fmt.Errorf("-timeout %v: want a positive duration", *limit)
	}
	if *cold {
		if err := dropCache(*dev); err != nil {
			return err
		}
	}
	cmd := exec.Command(*bin, append([]string{"serve", *dev, "--resp", *respAddr, "--listen", *grpcAddr, "--cluster", "none", "--log-level", "warn"}, strings.Fields(*extra)...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	exited := make(chan error, 1) // a server that exits before its first GET ends the polls at once
	go func() { exited <- cmd.Wait(); cancel() }()
	want := payload(0)
	type res struct {
		name string
		d    time.Duration
		err  error
	}
	done := make(chan res, 2)
	go func() { d, err := pollRESP(ctx, *respAddr, Key(0).String(), want, t0); done <- res{"resp", d, err} }()
	go func() { d, err := pollGRPC(ctx, *grpcAddr, Key(0).String(), want, t0); done <- res{"grpc", d, err} }()
	var firstErr error
	got := map[string]time.Duration{}
	for range 2 {
		r := <-done
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", r.name, r.err)
		}
		got[r.name] = r.d
	}
	if firstErr == nil {
		fmt.Printf("first GET: resp %.3f s, grpc %.3f s; load %s\n", got["resp"].Seconds(), got["grpc"].Seconds(), sys.LoadAvgText())
		firstErr = dirty(*respAddr)
	}
	sig := syscall.SIGINT
	if *stop == "kill" {
		sig = syscall.SIGKILL
	}
	_ = cmd.Process.Signal(sig)
	ts := time.Now()
	if err := <-exited; firstErr != nil && err != nil {
		firstErr = fmt.Errorf("%w (rbctl serve: %v)", firstErr, err)
	}
	fmt.Printf("stopped with %v in %.3f s\n", sig, time.Since(ts).Seconds())
	return firstErr
}

func openOnly(args []string) error {
	fs := flag.NewFlagSet("open", flag.ExitOnError)
	dev := fs.String("dev", "", "filled cache image")
	prof := fs.String("cpuprofile", "", "write a CPU profile of the open here")
	cold := fs.Bool("cold", false, "drop the image from the page cache first")
	walk := fs.Bool("walk", false, "then walk the index as a node's start does (Engine.Entries, every key spelled; the node's LRU seeding on top is BenchmarkEvictorSeed in p2p/node)")
	_ = fs.Parse(args)
	if err := needDev(*dev, fs); err != nil {
		return err
	}
	if *cold {
		if err := dropCache(*dev); err != nil {
			return err
		}
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	e, err := cache.Open(*dev, cache.OpenOptions{ReadOnly: true, Device: serveDevice(true)})
	if err != nil {
		return err
	}
	d := time.Since(t0)
	rep := e.Stats().Recovery
	fmt.Printf("open %.3f s (engine recovery %.3f s), %d entries kept, %d dropped; load %s\n", d.Seconds(), rep.Duration.Seconds(), rep.Kept, len(rep.Dropped), sys.LoadAvgText())
	if *walk {
		t1 := time.Now()
		n, bytes := 0, 0
		e.Entries(func(k engine.Key, _ engine.EntryMeta) bool {
			n, bytes = n+1, bytes+len(k.String())
			return true
		})
		fmt.Printf("walk %.3f s (%d keys, %d bytes of keys)\n", time.Since(t1).Seconds(), n, bytes)
	}
	return e.Close()
}

// dirty SETs a few new keys, so that the index has changed since the last checkpoint.
func dirty(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := range 4 {
		k := Key(1<<30 + int(time.Now().UnixNano()%1e9) + i).String()
		if _, err := fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nabc\r\n", len(k), k); err != nil {
			return err
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("SET: %q %v", line, err)
		}
	}
	return nil
}

func pollRESP(ctx context.Context, addr, key string, want []byte, t0 time.Time) (time.Duration, error) {
	req := fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	for ctx.Err() == nil {
		if v, err := respGet(addr, req); err == nil && string(v) == string(want) {
			return time.Since(t0), nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, ctx.Err()
}

func respGet(addr, req string) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "$") {
		return nil, fmt.Errorf("reply %q: %v", line, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("reply %q", line)
	}
	b := make([]byte, n+2)
	_, err = io.ReadFull(r, b)
	return b[:n], err
}

func pollGRPC(ctx context.Context, addr, key string, want []byte, t0 time.Time) (time.Duration, error) {
	for ctx.Err() == nil {
		c, err := client.Dial(addr, time.Second)
		if err == nil {
			ch, err := c.Get(ctx, client.EncodedKey(key), true)
			c.Close()
			if err == nil && string(ch.GetPayload()) == string(want) {
				return time.Since(t0), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, ctx.Err()
}

// dropCache writes back and drops the image's pages, so the start reads from the disk.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// needDev refuses a missing -dev before anything is opened.
func needDev(dev string, fs *flag.FlagSet) error {
	if dev == "" {
		return fmt.Errorf("%s: -dev is required (a cache image made by rbctl format)", fs.Name())
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q (flags only)", fs.Name(), fs.Args())
	}
	return nil
}
