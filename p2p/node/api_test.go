package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// TestCacheAPIRefusesBadInput: malformed calls are InvalidArgument and change nothing.
func TestCacheAPIRefusesBadInput(t *testing.T) {
	e := newEngine(t, nil)
	n := startNode(t, e, fastOptions("a", nil))
	cc := rawConn(t, n.Peer().Control, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	api := p2ppb.NewCacheClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	many := make([]*p2ppb.ObjectKey, n.maxGetKeys()+1)
	for i := range many {
		many[i] = wireKeyN(i)
	}
	k := []*p2ppb.ObjectKey{wireKeyN(1)}
	for name, call := range map[string]func() error{
		"put without payload": func() error { _, err := api.Put(ctx, &p2ppb.PutRequest{Keys: k}); return err },
		"put empty payload":   func() error { _, err := api.Put(ctx, &p2ppb.PutRequest{Keys: k, Payloads: [][]byte{{}}}); return err },
		"put above a slot": func() error {
			_, err := api.Put(ctx, &p2ppb.PutRequest{Keys: k, Payloads: [][]byte{make([]byte, chunkBytes+1)}})
			return err
		},
		"put bad key": func() error {
			_, err := api.Put(ctx, &p2ppb.PutRequest{Keys: []*p2ppb.ObjectKey{{ModelName: "m"}}, Payloads: [][]byte{{1}}})
			return err
		},
		"get without keys":      func() error { _, err := api.Get(ctx, &p2ppb.GetRequest{}); return err },
		"get above the message": func() error { _, err := api.Get(ctx, &p2ppb.GetRequest{Keys: many}); return err },
		"lookup above the batch": func() error {
			_, err := api.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: make([]*p2ppb.ObjectKey, 257)})
			return err
		},
		"list bad salt": func() error { _, err := api.List(ctx, &p2ppb.ListRequest{CacheSalt: "a@b"}); return err },
	} {
		if err := call(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if u := e.Usage(); u.SlotsUsed != 0 {
		t.Fatalf("bad calls stored %d entries", u.SlotsUsed)
	}
}
