package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/resp"
)

// lmcClient reads replies exactly as LMCache's C++ RESP client (RedisConnector) does: one
// blocking connection, one command in flight, 5 bytes after a SET ("+OK\r\n"), 4 after
// EXISTS or DEL (":1\r\n"), a GET's "$-1" a miss; it never reconnects. Any other reply is
// what would put the real client out of step, and fails the test.
type lmcClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (l *lmcClient) send(args ...[]byte) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n", len(a))
		b.Write(a)
		b.WriteString("\r\n")
	}
	l.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := l.c.Write(b.Bytes()); err != nil {
		l.t.Errorf("write: %v (the connection is lost for good)", err)
	}
}

func (l *lmcClient) exact(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(l.br, b); err != nil {
		l.t.Errorf("read %d bytes: %v", n, err)
	}
	return string(b)
}

func (l *lmcClient) set(k string, v []byte) {
	l.send([]byte("SET"), []byte(k), v)
	if got := l.exact(5); got != "+OK\r\n" {
		l.t.Errorf("SET %s (%d bytes): %q, the client is out of step", k, len(v), got)
	}
}

func (l *lmcClient) count(cmd, k string) bool {
	l.send([]byte(cmd), []byte(k))
	got := l.exact(4)
	if got != ":1\r\n" && got != ":0\r\n" {
		l.t.Errorf("%s %s: %q, the client is out of step", cmd, k, got)
	}
	return got == ":1\r\n"
}

// get returns the value, or nil for $-1.
func (l *lmcClient) get(k string) []byte {
	l.send([]byte("GET"), []byte(k))
	head, err := l.br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") || !strings.HasSuffix(head, "\r\n") {
		l.t.Errorf("GET %s: %q %v", k, head, err)
		return nil
	}
	n, err := strconv.Atoi(head[1 : len(head)-2])
	if err != nil || n < -1 {
		l.t.Errorf("GET %s: header %q", k, head)
	}
	if n < 0 {
		return nil
	}
	b := []byte(l.exact(n + 2))
	return b[:n]
}

// value is key i's chunk: n bytes that name it.
func value(i, n int) []byte {
	v := make([]byte, n)
	for j := range v {
		v[j] = byte(i*131 + j*7 + j>>8)
	}
	return v
}

// lmcKey is LMCache's native spelling of chunk i of worker w.
func lmcKey(w, i int) string { return fmt.Sprintf("lmc/model@00000000@0@%04x%04x@tenant", w, i) }

// LMCache's client against a node that fills up with --eviction none and is given values
// over a slot's payload (kept by the reader and discarded by it), empty values and injected
// write and read I/O errors: 8 connections, each its own worker, never reconnecting. Every
// SET is answered the 5 bytes the client reads, every EXISTS and DEL 4; every GET the client
// counts as loaded is byte-exact; every connection still works at the end; the drops are
// counted by reason in the node's stats and INFO.
func TestLMCacheClientStaysInStep(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 4096+64<<10, 1<<20, false
	fd := faultdev.New(blockdev.NewMem(4<<20, 512), 1)
	e, err := engine.Format(fd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	n, err := New(e, Config{Name: "lmc"}) // eviction none
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	payload := n.MaxPayload()
	ctx, cancel := context.WithCancel(context.Background())
	addr, stop, err := n.ServeRESP(ctx, RESPConfig{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); stop() }()
	// The first two slot writes and the first two loads fail with EIO.
	fd.Add(faultdev.Rule{Name: "write-eio", Class: faultdev.ClassWrite, Times: 2, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
	fd.Add(faultdev.Rule{Name: "read-eio", Class: faultdev.ClassRead, Times: 2, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})

	const workers, chunks = 8, 24
	clients := make([]*lmcClient, workers)
	for w := range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[w] = &lmcClient{t: t, c: c, br: bufio.NewReader(c)}
	}
	var mu sync.Mutex
	loaded, missed := 0, 0
	var wg sync.WaitGroup
	for w, l := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range chunks {
				k := lmcKey(w, i)
				var v []byte
				switch i % 6 {
				case 1:
					v = value(i, payload+1) // one byte over a slot: the reader discards it
				case 2:
					v = value(i, 3*payload) // far over (still within the bound): discarded
				case 3:
					v = nil // empty
				default:
					v = value(w*chunks+i, payload/2+i*97)
				}
				l.set(k, v)
				l.count("EXISTS", k)
				got := l.get(k)
				mu.Lock()
				switch {
				case got == nil:
					missed++
				case len(v) == 0 || len(v) > payload || !bytes.Equal(got, v):
					t.Errorf("worker %d chunk %d: GET gave %d bytes, not the %d SET", w, i, len(got), len(v))
				default:
					loaded++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if loaded == 0 || missed == 0 {
		t.Fatalf("loaded %d, missed %d: want both (the node fills up)", loaded, missed)
	}
	// Every connection still works: a DEL frees a slot, a SET there loads back byte-exact.
	for w, l := range clients {
		for i := range chunks {
			if l.count("DEL", lmcKey(w, i)) {
				break
			}
		}
	}
	for w, l := range clients {
		k, v := lmcKey(w, 999), value(w+7, payload)
		l.set(k, v)
		if got := l.get(k); got != nil && !bytes.Equal(got, v) {
			t.Errorf("worker %d after the run: GET not byte-exact", w)
		}
	}
	st := n.Stats().Counters
	t.Logf("loaded %d, missed %d; dropped: too_large %d, empty %d, full %d, error %d; get_failed %d; slots %d",
		loaded, missed, st["resp_set_dropped/too_large"], st["resp_set_dropped/empty"], st["resp_set_dropped/full"],
		st["resp_set_dropped/error"], st["resp_get_failed"], st["slots_total"])
	for _, r := range []string{resp.DropTooLarge, resp.DropEmpty, resp.DropFull, resp.DropError} {
		if st["resp_set_dropped/"+r] == 0 {
			t.Errorf("resp_set_dropped/%s is 0: %v", r, st)
		}
	}
	if st["resp_set_dropped/too_large"] != 2*workers*chunks/6 || st["resp_set_dropped/empty"] != workers*chunks/6 {
		t.Errorf("drops %v", st)
	}
	if st["resp_get_failed"] == 0 || fd.Counts().Injected != 4 {
		t.Errorf("resp_get_failed %d, faults injected %d", st["resp_get_failed"], fd.Counts().Injected)
	}
	info := bulkReply(t, clients[0].c, cmd("INFO", "stats"))
	if !strings.Contains(info, "rbctl_resp_set_dropped_full:") || !strings.Contains(info, "rbctl_resp_set_dropped_too_large:") {
		t.Errorf("INFO stats:\n%s", info)
	}
}

func cmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// bulkReply sends in and reads one bulk-string reply.
func bulkReply(t *testing.T, c net.Conn, in string) string {
	t.Helper()
	io.WriteString(c, in)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("reply to %q: %q %v", in, head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	b := make([]byte, n+2)
	if _, err := io.ReadFull(br, b); err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}
