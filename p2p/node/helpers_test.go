package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

const chunkBytes = 256 << 10

// cacheConfig: slots of 4 KiB header + 256 KiB payload, 1 MiB metadata.
func cacheConfig() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = 4096 + chunkBytes
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.QueueDepth = 8
	return c
}

// newEngine formats a 32 MiB in-memory cache (about 120 slots); hook may set the policy.
func newEngine(t testing.TB, hook func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := cacheConfig()
	if hook != nil {
		hook(&cfg)
	}
	e, err := engine.Format(blockdev.NewMem(32<<20, 512), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// fastOptions keep tests quick: short timeouts, short backoff.
func fastOptions(name string, dir p2p.Directory) Config {
	return Config{Name: name, Directory: dir, LookupTimeout: 2 * time.Second, FetchTimeout: 3 * time.Second,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
}

func listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startNode(t testing.TB, e *engine.Engine, o Config) *Node {
	t.Helper()
	n, err := New(e, o)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve(listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"))
	t.Cleanup(func() { n.Close() })
	return n
}

// startNodeIn starts a node on engine e in namespace i of nt, its control plane on ctlPort
// and its data plane on dataPort of the namespace's address ("0": any).
func startNodeIn(t testing.TB, nt *p2ptest.Net, i int, e *engine.Engine, o Config, ctlPort, dataPort string) *Node {
	t.Helper()
	n, err := New(e, o)
	if err != nil {
		t.Fatal(err)
	}
	var ls [2]net.Listener
	for j, port := range []string{ctlPort, dataPort} {
		if ls[j], err = nt.Listen(i, "tcp", net.JoinHostPort(nt.Nodes[i].IP, port)); err != nil {
			t.Fatal(err)
		}
	}
	n.Serve(ls[0], ls[1])
	t.Cleanup(func() { n.Close() })
	return n
}

func dial(t testing.TB, n *Node) *client.Client {
	t.Helper()
	c, err := client.Dial(n.Peer().Control, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a plain gRPC connection to addr (a node's control plane), for calls the client
// package does not make; closed when the test ends.
func rawConn(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func hashOf(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15) }

func keyN(i int) engine.Key { return engine.ObjectKey("m/odel", 0, hashOf(i), "tenant") }

func wireKeyN(i int) *p2ppb.ObjectKey { return client.Key("m/odel", 0, hashOf(i), "tenant") }

func payloadN(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*131 + j*7 + j>>9)
	}
	return p
}

func put(t testing.TB, c *client.Client, i, size int) {
	t.Helper()
	o, err := c.Put(context.Background(), wireKeyN(i), payloadN(i, size))
	if err != nil || !o.Stored {
		t.Fatalf("put %d: %+v, %v", i, o, err)
	}
}

func get(t testing.TB, c *client.Client, i int) *p2ppb.Chunk {
	t.Helper()
	ch, err := c.Get(context.Background(), wireKeyN(i), false)
	if err != nil {
		t.Fatalf("get %d: %v", i, err)
	}
	if ch.Source != p2ppb.Source_SOURCE_MISS && !bytes.Equal(ch.Payload, payloadN(i, len(ch.Payload))) {
		t.Fatalf("get %d: wrong bytes from %s", i, ch.Source)
	}
	return ch
}

// locks is the engine's lock count of key i (0 when absent).
func locks(e *engine.Engine, i int) uint32 {
	m, _ := e.Lookup(keyN(i))
	return m.Locks
}

// eventually polls cond until it holds or 10 s pass (a bound on a wait, not a timing
// assertion).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not true after 10s: %s", what)
}

type (
	keyT    = engine.Key
	engineT = *engine.Engine
)
