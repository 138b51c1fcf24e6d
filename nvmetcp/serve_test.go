package nvmetcp

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/rbctl/rbctl/emu"
)

// TestListenAndServe: the target accepts a connection once started has run, and returns
// nil when its context ends; an error from started stops it before it serves.
func TestListenAndServe(t *testing.T) {
	ctrl, err := emu.Open("emu:mem?size=16M&ru=1M&ruhs=2")
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrc := make(chan net.Addr, 1)
	go func() {
		done <- ListenAndServe(ctx, "127.0.0.1:0", Config{NQN: testNQN, Backend: ctrl},
			func(a net.Addr) error { addrc <- a; return nil })
	}()
	var addr net.Addr
	var c net.Conn
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("ended before it started: %v", err)
	}
	c, err = net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("after cancel: %v", err)
	}
	stop := errors.New("no output")
	err = ListenAndServe(context.Background(), "127.0.0.1:0", Config{NQN: testNQN, Backend: ctrl},
		func(net.Addr) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("started failing: %v", err)
	}
}
