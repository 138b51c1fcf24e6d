// Package client is the local client of an rbctl cache node (`rbctl serve`): put, get,
// delete, list and stats over the node's gRPC control plane. Every call carries a deadline.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// MaxMessageBytes bounds what the client accepts in one answer (a Get batch of payloads).
const MaxMessageBytes = 1 << 30

// Client talks to one node.
type Client struct {
	addr    string
	cc      *grpc.ClientConn
	api     p2ppb.CacheClient
	timeout time.Duration
}

// Dial prepares a client of the node at addr (host:port); the connection is made on the
// first call. timeout is each call's deadline (0: 30 s). opts add to the defaults (e.g.
// WithToken).
func Dial(addr string, timeout time.Duration, opts ...grpc.DialOption) (*Client, error) {
	return dial(addr, timeout, insecure.NewCredentials(), opts...)
}

func dial(addr string, timeout time.Duration, creds credentials.TransportCredentials, opts ...grpc.DialOption) (*Client, error) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", addr, err)
	}
	return &Client{addr: addr, cc: cc, api: p2ppb.NewCacheClient(cc), timeout: timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

// Key is an object key from LMCache's ObjectKey fields.
func Key(model string, kvRank uint32, chunkHash []byte, cacheSalt string) *p2ppb.ObjectKey {
	return &p2ppb.ObjectKey{ModelName: model, KvRank: int64(kvRank), ChunkHash: chunkHash, CacheSalt: cacheSalt}
}

// EncodedKey is a key already encoded as the cache stores it.
func EncodedKey(s string) *p2ppb.ObjectKey { return &p2ppb.ObjectKey{Encoded: s} }

func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// PutOutcome is what the node did with one put.
type PutOutcome struct {
	Stored   bool // written by this call
	Present  bool // held after the call (stored, or there already)
	Declined bool // not stored: the node's admission policy declined it
}

// Put stores payload under key; Stored is false when the key was already there, the cache
// is full, or the node's admission policy declined it (the outcome tells which).
func (c *Client) Put(ctx context.Context, key *p2ppb.ObjectKey, payload []byte) (PutOutcome, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.api.Put(ctx, &p2ppb.PutRequest{Keys: []*p2ppb.ObjectKey{key}, Payloads: [][]byte{payload}})
	if err != nil {
		return PutOutcome{}, c.wrap(err)
	}
	if len(r.Stored) != 1 || len(r.Present) != 1 || len(r.Declined) > 1 {
		return PutOutcome{}, c.wrap(fmt.Errorf("answer has %d results for 1 key", len(r.Stored)))
	}
	return PutOutcome{Stored: r.Stored[0], Present: r.Present[0], Declined: len(r.Declined) == 1 && r.Declined[0]}, nil
}

// Get returns key's chunk; a miss is a Chunk with Source SOURCE_MISS, not an error.
func (c *Client) Get(ctx context.Context, key *p2ppb.ObjectKey, localOnly bool) (*p2ppb.Chunk, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.api.Get(ctx, &p2ppb.GetRequest{Keys: []*p2ppb.ObjectKey{key}, LocalOnly: localOnly})
	if err != nil {
		return nil, c.wrap(err)
	}
	if len(r.Chunks) != 1 {
		return nil, c.wrap(fmt.Errorf("answer has %d chunks for 1 key", len(r.Chunks)))
	}
	return r.Chunks[0], nil
}

// Delete removes key; false when it was not there (or is pinned and force is false).
func (c *Client) Delete(ctx context.Context, key *p2ppb.ObjectKey, force bool) (bool, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.api.Delete(ctx, &p2ppb.DeleteRequest{Keys: []*p2ppb.ObjectKey{key}, Force: force})
	if err != nil {
		return false, c.wrap(err)
	}
	return len(r.Deleted) == 1 && r.Deleted[0], nil
}

// List returns the node's keys (salt "" = all; maxKeys 0 = the node's cap).
func (c *Client) List(ctx context.Context, salt string, maxKeys int) (*p2ppb.ListResponse, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.api.List(ctx, &p2ppb.ListRequest{CacheSalt: salt, MaxKeys: uint32(max(0, maxKeys))})
	if err != nil {
		return nil, c.wrap(err)
	}
	return r, nil
}

// Stats returns the node's counters and latencies.
func (c *Client) Stats(ctx context.Context) (*p2ppb.StatsResponse, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.api.Stats(ctx, &p2ppb.StatsRequest{})
	if err != nil {
		return nil, c.wrap(err)
	}
	return r, nil
}

// MaxPayload asks the node for the largest payload Put takes (the max_payload_bytes of
// Stats): a client reads no more input than that, and learns that the node is reachable
// before it reads any. A node too old to announce it gets 1 GiB, the largest gRPC message a
// node accepts; so does a token without the admin right (Stats is refused, the node is
// there and took the token: it refuses an oversized Put itself).
func (c *Client) MaxPayload(ctx context.Context) (int64, error) {
	s, err := c.Stats(ctx)
	if status.Code(errors.Unwrap(err)) == codes.PermissionDenied {
		return 1 << 30, nil
	}
	if err != nil {
		return 0, err
	}
	if n := s.Counters["max_payload_bytes"]; n > 0 {
		return n, nil
	}
	return 1 << 30, nil
}
