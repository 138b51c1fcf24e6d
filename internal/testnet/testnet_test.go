package testnet

import (
	"net"
	"strconv"
	"testing"
)

// TestPortBelowEphemeral: the port is free, below the ephemeral range, and Addr listens.
func TestPortBelowEphemeral(t *testing.T) {
	p := Port(t)
	if p < lowest || p >= ephemeralStart() {
		t.Fatalf("port %d outside %d..%d", p, lowest, ephemeralStart())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	ln.Close()
	a := Addr(t)
	ln, err = net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("Addr %s: %v", a, err)
	}
	ln.Close()
}
