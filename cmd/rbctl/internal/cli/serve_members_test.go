package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// lockedBuf is a log a child process writes while the test reads it.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeMembershipAcrossNamespaces (root with ip; skipped otherwise): three nodes in
// network namespaces of their own, all with default names on one host name, listening on
// 0.0.0.0. The first one's seed is down when it starts: it serves alone and keeps joining.
// They find each other (three distinct names, each advertising its own address); one is
// killed: the others drop it, log it and show it in remote stats.
func TestServeMembershipAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	nt := p2ptest.NewNet(t, 3)
	dir := t.TempDir()
	ctx := context.Background()
	stats := func(ns int) map[string]int64 {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := nt.Command(ctx, ns, os.Args[0], "remote", "stats", "--server", nt.Nodes[ns].IP+":7470", "--json")
		cmd.Env = append(os.Environ(), envAsMain+"=1")
		out, err := cmd.Output()
		var st struct{ Counters map[string]int64 }
		if err != nil || json.Unmarshal(out, &st) != nil {
			t.Fatalf("remote stats on node %d: %v %s", ns, err, out)
		}
		return st.Counters
	}
	logs := make([]*lockedBuf, 3)
	srvs := make([]*os.Process, 3)
	for i := range 3 {
		dev := filepath.Join(dir, fmt.Sprintf("n%d.img", i))
		if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
			t.Fatalf("format: exit %d: %s", code, se)
		}
		seed := nt.Nodes[0].IP + ":7946"
		if i == 0 {
			seed = nt.Nodes[2].IP + ":7946" // not started yet
		}
		cmd := nt.Command(ctx, i, os.Args[0], "serve", dev, "--listen", "0.0.0.0:7470", "--gossip", "0.0.0.0:7946", "--join", seed, "--json")
		logs[i] = &lockedBuf{}
		cmd.Stderr = logs[i]
		c, ctl, _ := startServeCmd(t, dir, cmd)
		srvs[i] = c.Process
		if want := nt.Nodes[i].IP + ":7470"; ctl != want {
			t.Fatalf("node %d advertises %s, want %s", i, ctl, want)
		}
	}
	if !strings.Contains(logs[0].String(), "no seed answered") {
		t.Fatalf("node 0 with its seed down logged:\n%s", logs[0].String())
	}
	names := map[string]bool{}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		ok := true
		for i := range 3 {
			if stats(i)["members"] != 3 {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the nodes did not find each other in 60s; node 0 logged:\n%s", logs[0].String())
		}
	}
	for k := range stats(0) {
		if name, ok := strings.CutPrefix(k, "member/"); ok {
			names[name[:strings.LastIndexByte(name, '/')]] = true
		}
	}
	if len(names) != 2 {
		t.Fatalf("node 0 lists peers %v, want 2 distinct names", names)
	}
	srvs[2].Signal(syscall.SIGKILL)
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		s := stats(0)
		failed := 0
		for k, v := range s {
			if strings.HasPrefix(k, "member/") && strings.HasSuffix(k, "/state") && v == 2 {
				failed++
			}
		}
		if s["members"] == 2 && failed == 1 && strings.Contains(logs[0].String(), "member dropped") {
			t.Logf("node 0 after the kill: members %d, failed %d; log:\n%s", s["members"], failed, logs[0].String())
			break
		}
		if time.Now().After(end) {
			t.Fatalf("node 0 did not drop the killed node in 90s: %v\n%s", s, logs[0].String())
		}
	}
}
