package dataplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// TLS runs under the protocol: the hello and every frame travel inside the TLS session,
// unchanged (the wire constants and Version stay as they are). A server with
// ServerConfig.TLS accepts only connections that complete the handshake its tls.Config
// asks for (rbctl's nodes: a client certificate the cluster's CA signed).

// handshake runs the server side of TLS on c within c's deadline; nil when it failed (the
// connection is closed by the caller's untrack).
func (s *Server) handshake(c net.Conn) net.Conn {
	tc := tls.Server(c, s.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		s.tlsFailed.Add(1)
		return nil
	}
	return tc
}

// DialTLS is Dial over TLS with cfg (its ServerName, when empty, is the host of addr).
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Conn, error) {
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return dial(ctx, addr, func(c net.Conn) (net.Conn, error) {
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("data plane TLS handshake with %s: %w", addr, ctxErr(ctx, noEOF(err)))
		}
		return tc, nil
	})
}
