package cli

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

func crashKey(i int) *p2ppb.ObjectKey {
	return client.Key("m", 0, []byte(fmt.Sprintf("crash-%06d", i)), "t")
}

func crashPayload(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%06d.", i)), 100+i%50)
}

// waitCheckpoints polls the node until its checkpoint count reaches want (a bound on a
// wait, not a timing assertion) and returns the count.
func waitCheckpoints(t *testing.T, c *client.Client, want int64) int64 {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := c.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Counters["checkpoints"]; n >= want {
			return n
		}
		if time.Now().After(end) {
			t.Fatalf("checkpoints %d, still below %d after 30s", s.Counters["checkpoints"], want)
		}
	}
}

// present counts keys [from, to) the node serves from its own cache byte-exact; a key
// with other bytes fails the test.
func present(t *testing.T, c *client.Client, from, to int) int {
	t.Helper()
	n := 0
	for i := from; i < to; i++ {
		ch, err := c.Get(context.Background(), crashKey(i), true)
		switch {
		case err != nil:
			t.Fatal(err)
		case ch.Source == p2ppb.Source_SOURCE_MISS:
		case !bytes.Equal(ch.Payload, crashPayload(i)):
			t.Fatalf("key %d: wrong bytes after the crash", i)
		default:
			n++
		}
	}
	return n
}

// TestServeSurvivesKill9: a node killed with SIGKILL keeps every put acknowledged before
// a checkpoint that began after it, idle and under sustained puts; recover --verify finds
// nothing to drop.
func TestServeSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "c.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "64M", "--slot-bytes", "16K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	var srv *exec.Cmd
	serve := func() (func(), *client.Client) {
		var ctl string
		srv, ctl, _ = startServe(t, dir, dev, "--cluster", "none", "--checkpoint-interval", "200ms")
		c, err := client.Dial(ctl, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return func() { c.Close(); srv.Process.Signal(syscall.SIGKILL); srv.Wait() }, c
	}

	// Idle: 5 puts, then nothing; kill once a checkpoint followed them.
	kill, c := serve()
	c0 := waitCheckpoints(t, c, 0)
	for i := range 5 {
		if err := c.Store(context.Background(), crashKey(i), crashPayload(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitCheckpoints(t, c, c0+1)
	kill()
	kill, c = serve()
	if n := present(t, c, 0, 5); n != 5 {
		t.Fatalf("idle: %d of 5 acknowledged keys after kill -9", n)
	}

	// Sustained: a writer puts without pause; the keys acknowledged before a checkpoint
	// that started after them must survive a kill while the writer goes on.
	var mu sync.Mutex
	acked := 5
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 5; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Store(context.Background(), crashKey(i), crashPayload(i)); err != nil {
				return // the kill
			}
			mu.Lock()
			acked = i + 1
			mu.Unlock()
		}
	}()
	time.Sleep(500 * time.Millisecond) // let the writer run; no assertion rests on it
	mu.Lock()
	before := acked
	mu.Unlock()
	s, _ := c.Stats(context.Background())
	waitCheckpoints(t, c, s.Counters["checkpoints"]+2) // the second began after `before` was acknowledged
	mu.Lock()
	atKill := acked
	mu.Unlock()
	kill()
	close(stop)
	<-done
	kill, c = serve()
	n := present(t, c, 0, before)
	after := present(t, c, before, atKill)
	t.Logf("sustained: %d of %d keys acknowledged before the window present, %d of %d acknowledged later; %d acknowledged at the kill",
		n, before, after, atKill-before, atKill)
	if n != before {
		t.Fatalf("sustained: %d of %d keys acknowledged before a completed checkpoint survived kill -9", n, before)
	}
	// SIGTERM right after a put: the final checkpoint keeps it.
	if err := c.Store(context.Background(), crashKey(atKill+1), crashPayload(atKill+1)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	}
	kill, c = serve()
	if present(t, c, atKill+1, atKill+2) != 1 {
		t.Fatal("a put acknowledged just before SIGTERM is lost")
	}
	kill()
	code, so, se := runRbctl(t, dir, time.Minute, "recover", "--verify", dev)
	if code != 0 || !regexp.MustCompile(`kept \d+, dropped 0\b`).MatchString(so) {
		t.Fatalf("recover --verify: exit %d\n%s%s", code, so, se)
	}
	t.Logf("recover --verify: %s", regexp.MustCompile(`kept \d+, dropped \d+`).FindString(so))
}
