package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
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
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil {
			// Not TLS at all (a plain hello): crypto/tls closes without a word; a fatal
			// unexpected_message alert lets a plain client say what went wrong.
			re.Conn.Write([]byte{21, 3, 3, 0, 2, 2, 10})
		}
		return nil
	}
	return tc
}

// ErrPeerWantsTLS is a plain dial answered with a TLS alert: the peer serves TLS.
var ErrPeerWantsTLS = errors.New("the peer serves TLS and this side dialled plain TCP")

// isTLSAlert reports whether b starts like a TLS alert record (type 21, version 3.x): what
// a TLS server answers to a plain hello.
func isTLSAlert(b []byte) bool { return len(b) >= 2 && b[0] == 21 && b[1] == 3 }

// DialTLS is Dial over TLS with cfg (its ServerName, when empty, is the host of addr).
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Conn, error) {
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return dial(ctx, addr, func(c net.Conn) (net.Conn, error) {
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("data plane TLS handshake with %s (does it serve TLS?): %w", addr, ctxErr(ctx, noEOF(err)))
		}
		return tc, nil
	})
}
