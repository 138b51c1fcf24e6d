package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/testnet"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A member whose seed is down starts alone and joins once the seed is up; a killed member
// is logged dead, listed as failed and joined again when it returns; a second node under a
// taken name is logged as a conflict.
func TestMembershipExplainsItself(t *testing.T) {
	port := strconv.Itoa(testnet.Port(t)) // a port no other test can take meanwhile
	seed := net.JoinHostPort("127.0.0.1", port)
	var logA syncBuf
	cfg := Config{Name: "a", Timing: TimingFast, NoRegistry: true, ExpectedKeys: 100, Seeds: []string{seed},
		Events: slog.New(slog.NewTextHandler(&logA, nil))}
	a, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a member with explained events and its seed down: %v", err)
	}
	defer a.Shutdown()
	if !strings.Contains(logA.String(), "no seed answered") {
		t.Fatalf("a's log: %s", logA.String())
	}
	bcfg := Config{Name: "b", Timing: TimingFast, NoRegistry: true, ExpectedKeys: 100, BindAddr: "127.0.0.1"}
	bcfg.BindPort, _ = strconv.Atoi(port)
	b, err := Join(context.Background(), bcfg)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a joins its seed once it is up", seesPeers(a, "b"))
	if s := a.DirectoryStats(); s["members"] != 2 || s["member/b/state"] != StateAlive || s["directory_filter_bytes"] == 0 {
		t.Fatalf("a's directory stats: %v", s)
	}
	b.Shutdown()
	eventually(t, 2*a.FailureBound()+time.Second, "a lists b as failed", func() bool {
		return a.DirectoryStats()["member/b/state"] == StateFailed
	})
	if l := logA.String(); !strings.Contains(l, "member dropped") || !strings.Contains(l, "member suspected") {
		t.Fatalf("a's log after b died: %s", l)
	}
	b2, err := Join(context.Background(), bcfg) // b returns at the same address: a joins it again
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Shutdown()
	eventually(t, 10*time.Second, "a sees b again", seesPeers(a, "b"))
	ccfg := Config{Name: "b", Timing: TimingFast, NoRegistry: true, ExpectedKeys: 100, Seeds: []string{a.GossipAddr()}}
	if c, err := Join(context.Background(), ccfg); err == nil {
		defer c.Shutdown()
	}
	eventually(t, 10*time.Second, "a logs the name conflict", func() bool { return strings.Contains(logA.String(), "name conflict") })
}

// A persistent name is made once and read back; a name file that does not parse is
// replaced.
func TestPersistentName(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x", "name")
	n1, err := PersistentName(f, "host name/with:odd")
	if err != nil || !validName(n1) || !strings.HasPrefix(n1, "host-name-with-odd-") {
		t.Fatalf("first: %q %v", n1, err)
	}
	n2, err := PersistentName(f, "other")
	if err != nil || n2 != n1 {
		t.Fatalf("second: %q %v, want %q", n2, err, n1)
	}
	n3, _ := PersistentName(filepath.Join(t.TempDir(), "y"), "host name/with:odd")
	if n3 == n1 {
		t.Fatal("two name files got the same name")
	}
}
