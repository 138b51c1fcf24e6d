package p2ptest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNetReachesAcrossTheBridgeAndCutsLinks(t *testing.T) {
	nt := NewNet(t, 2)
	ln, err := nt.Listen(0, "tcp", nt.Nodes[0].IP+":7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	dial := nt.Dialer(1)
	echo := func() error {
		c, err := dial("tcp", ln.Addr().String(), 300*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 4)
		_, err = io.ReadFull(c, b)
		return err
	}
	// NewNet returned with every link up, so the first dial should pass; a few retries
	// keep a slow ARP reply from failing the test, and are logged.
	var firstErr error
	for attempt := 1; attempt <= 10; attempt++ {
		if firstErr = echo(); firstErr == nil {
			if attempt > 1 {
				t.Logf("node 1 reached node 0 on attempt %d", attempt)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if firstErr != nil {
		t.Fatalf("node 1 → node 0: %v\n%s", firstErr, nt.Describe())
	}
	if err := nt.LinkDown(0); err != nil {
		t.Fatal(err)
	}
	if err := echo(); err == nil {
		t.Fatal("node 1 reached node 0 with its link down")
	}
	if err := nt.LinkUp(0); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if lastErr = echo(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("after link up: %v", lastErr)
	}
}

func TestNetCommandRunsInTheNamespace(t *testing.T) {
	nt := NewNet(t, 1)
	out, err := nt.Command(context.Background(), 0, "ip", "-o", "-4", "addr", "show", "dev", nt.Nodes[0].Link).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !bytes.Contains(out, []byte(nt.Nodes[0].IP+"/24")) {
		t.Fatalf("eth0 in %s shows %q; want %s/24", nt.Nodes[0].NS, out, nt.Nodes[0].IP)
	}
}

func TestNetCleanupRemovesNamespaces(t *testing.T) {
	RequireNetns(t)
	var names []string
	t.Run("inner", func(t *testing.T) {
		nt := NewNet(t, 2)
		names = append(names, nt.Hub)
		for _, n := range nt.Nodes {
			names = append(names, n.NS)
		}
	})
	for _, n := range names {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); err == nil {
			t.Errorf("namespace %s left after its test ended", n)
		}
		if !strings.HasPrefix(n, nsPrefix) {
			t.Errorf("namespace %s lacks the %q prefix", n, nsPrefix)
		}
	}
}
