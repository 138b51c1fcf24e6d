package secure

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
)

// MinVersion is the oldest TLS version either plane accepts.
const MinVersion = tls.VersionTLS13

// ServerConfig is the configuration of a listener: each handshake gets the certificate and
// CA current when it starts, and must present a client certificate the CA signed.
func (m *Material) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s := m.cur.Load()
			c := &tls.Config{MinVersion: MinVersion, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: s.pool}
			if s.cert != nil {
				c.Certificates = []tls.Certificate{*s.cert}
			}
			return c, nil
		},
	}
}

// ClientConfig is the configuration of one dial: it trusts the CA current now and presents
// the certificate current at the handshake (none for a client without one). serverName is
// the name the server's certificate must carry ("": the dialled host, as crypto/tls and
// gRPC fill it in).
func (m *Material) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		RootCAs:    m.cur.Load().pool,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := m.cur.Load().cert; c != nil {
				return c, nil
			}
			return &tls.Certificate{}, nil // none: the server decides (a node refuses)
		},
	}
}

// ServerCredentials are the gRPC server's transport credentials (ServerConfig).
func (m *Material) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(m.ServerConfig())
}

// ClientCredentials are gRPC transport credentials that take a fresh ClientConfig for
// every connection, so a reload reaches reconnects of long-lived client connections.
func (m *Material) ClientCredentials() credentials.TransportCredentials {
	return clientCreds{m: m}
}

type clientCreds struct{ m *Material }

func (c clientCreds) creds() credentials.TransportCredentials {
	return credentials.NewTLS(c.m.ClientConfig(""))
}

func (c clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.creds().ClientHandshake(ctx, authority, raw)
}

func (c clientCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.creds().ServerHandshake(raw)
}

func (c clientCreds) Info() credentials.ProtocolInfo { return c.creds().Info() }

func (c clientCreds) Clone() credentials.TransportCredentials { return c }

//nolint:staticcheck // part of the interface; gRPC no longer calls it
func (c clientCreds) OverrideServerName(string) error { return nil }
