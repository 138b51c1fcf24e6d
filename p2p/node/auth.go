package node

import (
	"context"
	"math"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// Access control of the control plane (issue 28). With Config.Tokens set, every call must
// present a token of the file (gRPC metadata "authorization: Bearer TOKEN"): a call
// without one, or with one the file does not hold, is Unauthenticated; a call the token's
// rights or salts do not cover is PermissionDenied before it runs, so it changes nothing.
// What each method needs:
//
//	Cache/Get, LookupAndLock, Unlock   read on every key's cache_salt (Unlock: its own leases)
//	Cache/Put                          write on every key's cache_salt
//	Cache/Delete                       delete on every key's cache_salt; forced: admin
//	Cache/List, Stats                  admin
//	Peer/LookupAndLock, Unlock         peer (another node fetching; every salt)
//
// A token never reaches a log or an error message; only its name does.

// authorize is the unary interceptor that enforces the table above.
func (n *Node) authorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if n.opts.Tokens == nil {
		return h(ctx, req)
	}
	var secret string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(auth.MetadataKey); len(v) > 0 {
			secret = auth.FromHeader(v[0])
		}
	}
	tok, ok := n.opts.Tokens.Lookup(secret)
	if !ok {
		n.c.authFailed.Add(1)
		if secret == "" {
			return nil, status.Error(codes.Unauthenticated, "this node checks tokens and the call carries none")
		}
		return nil, status.Error(codes.Unauthenticated, "the call's token is not one this node knows")
	}
	if err := n.permit(tok, info.FullMethod, req); err != nil {
		n.c.authDenied.Add(1)
		return nil, err
	}
	return h(auth.WithToken(ctx, tok), req)
}

// permit says whether tok covers the call.
func (n *Node) permit(tok *auth.Token, method string, req any) error {
	var right auth.Right
	var keys []*p2ppb.ObjectKey
	switch r := req.(type) {
	case *p2ppb.LookupAndLockRequest:
		right, keys = auth.Read, r.Keys
	case *p2ppb.UnlockRequest:
		right = auth.Read
	case *p2ppb.GetRequest:
		right, keys = auth.Read, r.Keys
	case *p2ppb.PutRequest:
		right, keys = auth.Write, r.Keys
	case *p2ppb.DeleteRequest:
		right, keys = auth.Delete, r.Keys
		if r.Force {
			right, keys = auth.Admin, nil
		}
	default: // List, Stats, and whatever a later version adds
		right = auth.Admin
	}
	switch method {
	case p2ppb.Peer_LookupAndLock_FullMethodName, p2ppb.Peer_Unlock_FullMethodName:
		right, keys = auth.Peer, nil
	}
	if keys == nil { // Unlock (a lease names no salt: its owner is checked), admin, peer
		if ok := tok.Allows(right, "") || right == auth.Read && tok.Rights&auth.Read != 0; !ok {
			return denied(tok, right, "")
		}
		return nil
	}
	ks, err := keysOf(keys, n.cache.Shard(0).Config().Namespace, math.MaxInt)
	if err != nil {
		return nil // the handler refuses the malformed keys itself (InvalidArgument)
	}
	for _, k := range ks {
		if s := k.CacheSalt(); !tok.Allows(right, s) {
			return denied(tok, right, s)
		}
	}
	return nil
}

func denied(tok *auth.Token, r auth.Right, salt string) error {
	if r == auth.Admin || r == auth.Peer || salt == "" && tok.Rights&r == 0 {
		return status.Errorf(codes.PermissionDenied, "token %s lacks the %s right", tok.Name, r)
	}
	return status.Errorf(codes.PermissionDenied, "token %s may not %s keys of cache_salt %q", tok.Name, r, salt)
}

// clientOf is who a call counts against for leases: its token's name (a peer token's: the
// address, as the nodes of a cluster share one), else its address.
func clientOf(ctx context.Context) string {
	if t := auth.TokenOf(ctx); t != nil && t.Rights&auth.Peer == 0 {
		return "token:" + t.Name
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
			return "ip:" + ap.Addr().Unmap().String()
		}
		return "addr:" + p.Addr.String()
	}
	return "local"
}

// peerTokenOptions is the token this node presents to its peers, if any.
func (o *Config) peerTokenOptions() []grpc.DialOption {
	if o.PeerToken == "" {
		return nil
	}
	var c credentials.PerRPCCredentials = auth.Credentials{Secret: o.PeerToken}
	return []grpc.DialOption{grpc.WithPerRPCCredentials(c)}
}

// Tokens is the node's token file (nil: it checks none), for its other front-ends (RESP).
func (n *Node) Tokens() *auth.Tokens { return n.opts.Tokens }
