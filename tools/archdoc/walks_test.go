package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/node"
)

// Walks of a node's requests from a real run (issue 36): a RESP SET down to the device
// write, and a remote get that a peer serves, from the requester's gRPC call to the holder's
// device read and back to the requester's store of the replica. A capturing device records
// the stack of the first payload write or read once armed; the stacks are mapped to
// packages, each listed once, as the write path above is.

// captureDev is a device that records the stack of the first op it is armed for.
type captureDev struct {
	blockdev.Device
	mu        sync.Mutex
	want      func(op *blockdev.Op) bool // nil: disarmed
	stack     []step
	createdBy string
	done      chan struct{}
}

func newCaptureDev(size int64) *captureDev {
	return &captureDev{Device: blockdev.NewMem(size, 512), done: make(chan struct{})}
}

func (d *captureDev) arm(want func(op *blockdev.Op) bool) {
	d.mu.Lock()
	d.want = want
	d.mu.Unlock()
}

func (d *captureDev) Submit(ops []blockdev.Op) error {
	d.mu.Lock()
	if d.want != nil {
		for i := range ops {
			if d.want(&ops[i]) {
				d.stack, d.createdBy, d.want = stackSteps(2), createdBy(), nil
				close(d.done)
				break
			}
		}
	}
	d.mu.Unlock()
	return d.Device.Submit(ops)
}

func (d *captureDev) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no op captured", what)
	}
}

// payloadWrite matches a slot write (header and payload: more than the header), readOf a
// payload read.
func payloadWrite(op *blockdev.Op) bool { return op.Write && op.Len() > engine.DefaultHeaderBytes }
func payloadRead(op *blockdev.Op) bool  { return !op.Write && op.Len() >= 4096 }

const walkChunk = 64 << 10

// walkNode starts a node on a fresh capturing device.
func walkNode(t *testing.T, name string, cfg node.Config) (*node.Node, *captureDev) {
	t.Helper()
	ec := engine.DefaultConfig()
	ec.SlotBytes, ec.MetaTotalBytes, ec.Periodic = int64(engine.DefaultHeaderBytes+walkChunk), 1<<20, false
	dev := newCaptureDev(1<<20 + 32*ec.SlotBytes)
	e, err := engine.Format(dev, ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cfg.Name = name
	n, err := node.New(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ls [2]net.Listener
	for i := range ls {
		if ls[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	n.Serve(ls[0], ls[1])
	t.Cleanup(func() { n.Close() })
	return n, dev
}

// walk lists the packages of a stack in order, each once: the functions of a package the
// stack re-enters (the node's gRPC interceptors, then its handler) join its first visit.
func walk(stack []step) []step {
	var out []step
	at := map[string]int{}
	for _, s := range stack {
		if i, ok := at[s.pkg]; ok {
			out[i].funcs = append(out[i].funcs, s.funcs...)
			continue
		}
		at[s.pkg] = len(out)
		out = append(out, s)
	}
	return out
}

// traceRESPSet: redis protocol SET of one chunk in LMCache's native key spelling.
func traceRESPSet(t *testing.T) []step {
	n, dev := walkNode(t, "a", node.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := n.ServeRESP(ctx, node.RESPConfig{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev.arm(payloadWrite)
	key, val := "llama@00000000@0@00c0ffee@tenant-a", strings.Repeat("v", walkChunk)
	fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("SET: %q %v", line, err)
	}
	dev.wait(t, "RESP SET")
	s := walk(dev.stack)
	if dev.createdBy != "" {
		s[0].note = "the connection's goroutine, started by " + dev.createdBy
	}
	s = append(s, step{pkg: "blockdev", funcs: []string{"Device.Submit"}, note: "the slot write (header and payload); on a file or block device blockdev's io_uring device over internal/uring"})
	return s
}

// traceRemoteGet: a client's Get at node b misses there; b asks a (its peer) to look up and
// lock the chunk, pulls it over the data plane, checks it and stores it as a replica.
func traceRemoteGet(t *testing.T) []step {
	a, devA := walkNode(t, "a", node.Config{})
	ca, err := client.Dial(a.Peer().Control, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	key := client.Key("llama", 0, []byte{0xc0, 0xff, 0xee}, "tenant-a")
	if _, err := ca.Put(context.Background(), key, make([]byte, walkChunk)); err != nil {
		t.Fatal(err)
	}
	b, devB := walkNode(t, "b", node.Config{Directory: node.NewStaticDirectory(a.Peer())})
	cb, err := client.Dial(b.Peer().Control, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	devA.arm(payloadRead)
	devB.arm(payloadWrite)
	ch, err := cb.Get(context.Background(), key, false)
	if err != nil || len(ch.Payload) != walkChunk {
		t.Fatalf("get through b: %v", err)
	}
	devA.wait(t, "the holder's read")
	devB.wait(t, "the requester's replica write")
	holder := walk(devA.stack)
	for i := range holder {
		holder[i].note = "holder"
	}
	if devA.createdBy != "" {
		holder[0].note = "holder: the data-plane connection's goroutine, started by " + devA.createdBy
	}
	requester := walk(devB.stack)
	for i := range requester {
		requester[i].note = "requester"
	}
	if len(requester) > 1 {
		requester[0].note = "requester: the client's Get, in the gRPC server's handler goroutine"
		requester[1].note = "requester: the interceptors (deadline, tokens), the Get, the lookup-and-lock at the holder and the data-plane pull of the lease (fetchFrom), then the store of the checked chunk as a replica"
	}
	out := append(requester, step{pkg: "blockdev", funcs: []string{"Device.Submit"}, note: "requester: the replica's slot write"})
	return append(out, append(holder, step{pkg: "blockdev", funcs: []string{"Device.Submit"}, note: "holder: the payload read into the data plane's buffer, then written to the requester's connection"})...)
}

func TestWalks(t *testing.T) {
	set, get := traceRESPSet(t), traceRemoteGet(t)
	order := func(s []step) string {
		var p []string
		for _, x := range s {
			p = append(p, x.pkg)
		}
		return " " + strings.Join(p, " ") + " "
	}
	for _, w := range []struct {
		name  string
		steps []step
		want  [][2]string
	}{
		{"RESP SET", set, [][2]string{{"p2p/resp", "p2p/node"}, {"p2p/node", "engine/sharded"}, {"engine/sharded", "engine"}}},
		{"remote get", get, [][2]string{{"p2p/node", "engine/sharded"}, {"engine", "blockdev"}}},
	} {
		got := order(w.steps)
		for _, p := range w.want {
			i, j := strings.Index(got, " "+p[0]+" "), strings.Index(got, " "+p[1]+" ")
			if i < 0 || j < 0 || i > j {
				t.Errorf("%s %q: want %s before %s", w.name, got, p[0], p[1])
			}
		}
	}
	if os.Getenv("RBCTL_ARCHDOC_TRACE") != "1" {
		return
	}
	file := filepath.Join("..", "..", docPath)
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := string(doc)
	for _, s := range []struct {
		name  string
		steps []step
	}{{"archdoc:walk-resp-set", set}, {"archdoc:walk-remote-get", get}} {
		if out, err = replaceSection(out, s.name, writePathMarkdown(s.steps)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
