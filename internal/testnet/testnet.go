// Package testnet gives tests a loopback port that stays theirs until they listen on it. A
// port found by binding 127.0.0.1:0 and closing goes back to the kernel's ephemeral range
// (ip_local_port_range), where any other process binding :0 — another test binary of the
// same go test run, say — can be given it before the test's server (often another process,
// started later) listens there; Port picks one below that range instead, which no bind to
// :0 is given. It imports nothing of ours, so any package's tests may use it.
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the first port Port considers: above the ports servers commonly use.
const lowest = 10000

// Port returns a TCP port free on 127.0.0.1 now, below the ephemeral range. A test is
// skipped when that range starts too low to leave one.
func Port(t testing.TB) int {
	t.Helper()
	hi := ephemeralStart()
	if hi <= lowest+100 {
		t.Skipf("the ephemeral port range starts at %d: no free range below it", hi)
	}
	for range 200 {
		p := lowest + rand.IntN(hi-lowest)
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatalf("no free port in %d..%d", lowest, hi)
	return 0
}

// Addr is Port as a listen address, 127.0.0.1:PORT.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux's default, 32768,
// where /proc does not say).
func ephemeralStart() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
