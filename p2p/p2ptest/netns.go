// Package p2ptest is the harness for tests of rbctl's peer-to-peer parts: network
// namespaces joined by a bridge (RequireNetns, NewNet), and a fault-injecting TCP proxy
// (Proxy) for latency, bandwidth, stalls, resets, blackholes and corruption, which the
// host kernel (no netem, no iptables) cannot inject.
package p2ptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Subnet is the private range test namespaces take addresses from; node i is 10.231.0.i+1.
// The range exists only inside each Net's namespaces, so Nets never collide.
const Subnet = "10.231.0.0/24"

// nsPrefix starts every namespace this package creates; the creator's pid follows, so a
// later run can remove what a killed run left.
const nsPrefix = "rbt"

var netSeq atomic.Uint64

// Net is n network namespaces, each with a link "eth0" on a bridge that lives in a hub
// namespace of its own: nothing of it touches the host's network.
type Net struct {
	t     testing.TB
	Hub   string
	Nodes []Node
}

// Node is one namespace of a Net.
type Node struct {
	NS   string // namespace name (ip netns)
	IP   string // its address on the bridge
	Link string // its interface on the bridge
}

// RequireNetns skips the test unless it runs as root with the ip tool.
func RequireNetns(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespaces need the ip tool (iproute2): not in PATH")
	}
}

// NewNet creates n namespaces on a bridge, addressed from Subnet, and removes them when
// the test ends, whether it passed or not.
func NewNet(t testing.TB, n int) *Net {
	t.Helper()
	RequireNetns(t)
	if n < 1 || n > 250 {
		t.Fatalf("NewNet: %d namespaces; want 1–250", n)
	}
	sweepStale()
	base := fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), netSeq.Add(1))
	nt := &Net{t: t, Hub: base + "-hub"}
	nt.addNS(nt.Hub)
	nt.ip("-n", nt.Hub, "link", "add", "br0", "type", "bridge")
	nt.ip("-n", nt.Hub, "link", "set", "br0", "up")
	for i := 0; i < n; i++ {
		node := Node{NS: fmt.Sprintf("%s-n%d", base, i), IP: fmt.Sprintf("10.231.0.%d", i+1), Link: "eth0"}
		nt.addNS(node.NS)
		port := fmt.Sprintf("p%d", i)
		nt.ip("link", "add", "name", node.Link, "netns", node.NS, "type", "veth", "peer", "name", port, "netns", nt.Hub)
		nt.ip("-n", nt.Hub, "link", "set", port, "master", "br0", "up")
		nt.ip("-n", node.NS, "addr", "add", node.IP+"/24", "dev", node.Link)
		nt.ip("-n", node.NS, "link", "set", node.Link, "up")
		nt.ip("-n", node.NS, "link", "set", "lo", "up")
		nt.Nodes = append(nt.Nodes, node)
	}
	nt.waitUp(10 * time.Second)
	return nt
}

// waitUp returns once every veth end reports operstate UP. A link set up reaches that state
// only when the kernel's link watcher has run (it batches events, up to a second late), and
// until then the link's queue drops what it is given: a first dial made before it fails.
func (nt *Net) waitUp(limit time.Duration) {
	nt.t.Helper()
	type end struct{ ns, link string }
	var ends []end
	for i, n := range nt.Nodes {
		ends = append(ends, end{n.NS, n.Link}, end{nt.Hub, fmt.Sprintf("p%d", i)})
	}
	ends = append(ends, end{nt.Hub, "br0"})
	deadline := time.Now().Add(limit)
	for _, e := range ends {
		for {
			out, err := exec.Command("ip", "-n", e.ns, "-o", "link", "show", "dev", e.link).CombinedOutput()
			if err == nil && strings.Contains(string(out), "state UP") {
				break
			}
			if time.Now().After(deadline) {
				nt.t.Fatalf("link %s in %s not up after %v: %s", e.link, e.ns, limit, strings.TrimSpace(string(out)))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (nt *Net) addNS(name string) {
	nt.t.Helper()
	nt.ip("netns", "add", name)
	nt.t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			nt.t.Errorf("ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
	})
}

func (nt *Net) ip(args ...string) {
	nt.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		nt.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

// sweepStale removes namespaces of earlier runs whose process is gone.
func sweepStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}

// Describe returns the links of every namespace of the Net and the bridge's ports, for a
// failing test to print.
func (nt *Net) Describe() string {
	var b strings.Builder
	show := func(args ...string) {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	show("ip", "-n", nt.Hub, "-o", "link", "show")
	show("bridge", "-n", nt.Hub, "link", "show")
	for _, n := range nt.Nodes {
		show("ip", "-n", n.NS, "-o", "addr", "show")
		show("ip", "-n", n.NS, "neigh", "show")
	}
	return b.String()
}

// LinkDown takes node i's bridge link down: it is cut off from the others.
func (nt *Net) LinkDown(i int) error { return nt.link(i, "down") }

// LinkUp brings node i's bridge link back.
func (nt *Net) LinkUp(i int) error { return nt.link(i, "up") }

func (nt *Net) link(i int, state string) error {
	n := nt.Nodes[i]
	if out, err := exec.Command("ip", "-n", n.NS, "link", "set", n.Link, state).CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s link set %s %s: %v: %s", n.NS, n.Link, state, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command runs a program inside node i's namespace (ip netns exec).
func (nt *Net) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", nt.Nodes[i].NS, name}, args...)...)
}

// Do runs fn on an OS thread switched into node i's namespace. Sockets fn creates stay in
// that namespace whatever goroutine uses them later; goroutines fn starts do not run
// there, so a later dial must go through Dialer.
func (nt *Net) Do(i int, fn func() error) error {
	return Do(nt.Nodes[i].NS, fn)
}

// Do runs fn on an OS thread switched into the named namespace and switches back.
func Do(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked, so it ends with this goroutine instead of running
			// other goroutines in the wrong namespace.
			errc <- fmt.Errorf("setns back from %s: %w", ns, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dialer dials from inside node i's namespace.
func (nt *Net) Dialer(i int) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	ns := nt.Nodes[i].NS
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		err := Do(ns, func() error {
			var err error
			c, err = net.DialTimeout(network, addr, timeout)
			return err
		})
		return c, err
	}
}

// Listen listens inside node i's namespace.
func (nt *Net) Listen(i int, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := nt.Do(i, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}
