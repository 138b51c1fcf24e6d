package node

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rbctl/rbctl/p2p/dataplane"
)

// With Config.TLS both planes run mutual TLS (p2p/secure): the gRPC server and the data
// plane require a client certificate the CA signed, and this node presents its own and
// verifies the peer's when it dials peers. Without it both planes are plain TCP.

// grpcServerOptions adds the server's transport credentials.
func (o *Config) grpcServerOptions(opts ...grpc.ServerOption) []grpc.ServerOption {
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(o.TLS.ServerCredentials()))
	}
	return opts
}

// peerCredentials are the credentials of this node's connections to peers.
func (o *Config) peerCredentials() credentials.TransportCredentials {
	if o.TLS != nil {
		return o.TLS.ClientCredentials()
	}
	return insecure.NewCredentials()
}

// dataServerTLS is the data plane's listener configuration (nil: plain).
func (o *Config) dataServerTLS() *tls.Config {
	if o.TLS != nil {
		return o.TLS.ServerConfig()
	}
	return nil
}

// dialData opens a data-plane connection to a peer.
func (o *Config) dialData(ctx context.Context, addr string) (*dataplane.Conn, error) {
	if o.TLS != nil {
		return dataplane.DialTLS(ctx, addr, o.TLS.ClientConfig(""))
	}
	return dataplane.Dial(ctx, addr)
}

// tlsStats adds the TLS counters (only with TLS).
func (n *Node) tlsStats(m map[string]int64, dp dataplane.ServerStats) {
	if n.opts.TLS == nil {
		return
	}
	m["data_tls_failed"] = dp.TLSFailed
	m["tls_reloads"], m["tls_reload_errors"] = n.opts.TLS.Reloads()
}
