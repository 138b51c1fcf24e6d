package flagsets

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/secure"
)

// TLS is --tls-cert, --tls-key and --tls-ca: a node's (rbctl serve: all three or none) or a
// client's (rbctl remote: none, the CA alone, or all three).
type TLS struct {
	Files secure.Files
}

// Add defines the three flags; node says whose they are.
func (f *TLS) Add(cmd *cobra.Command, node bool) {
	fs := cmd.Flags()
	if node {
		fs.StringVar(&f.Files.Cert, "tls-cert", "", "PEM certificate this node presents to clients and peers (with --tls-key and --tls-ca: mutual TLS on both planes; reloaded on SIGHUP or when the files change)")
		fs.StringVar(&f.Files.Key, "tls-key", "", "PEM private key of --tls-cert")
		fs.StringVar(&f.Files.CA, "tls-ca", "", "PEM CA certificate(s): clients and peers must present a certificate it signed, and peers' certificates are verified against it")
		return
	}
	fs.StringVar(&f.Files.Cert, "tls-cert", "", "PEM client certificate (a node serving TLS requires one its CA signed)")
	fs.StringVar(&f.Files.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.Files.CA, "tls-ca", "", "PEM CA certificate that signed the node's certificate: connect over TLS (without it: plain TCP)")
}

// Dial connects a client to addr: over TLS when --tls-ca is given, else plain TCP.
func (f *TLS) Dial(addr string, opts ...grpc.DialOption) (*client.Client, error) {
	if err := f.Files.CheckClient(); err != nil {
		if f.Files.CA == "" {
			return nil, errors.New("--tls-cert and --tls-key need --tls-ca (the CA that signed the node's certificate)")
		}
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if f.Files.Empty() {
		return client.Dial(addr, 0, opts...)
	}
	m, err := secure.Load(f.Files, nil)
	if err != nil {
		return nil, fmt.Errorf("TLS: %v", err)
	}
	return client.DialTLS(addr, 0, m, opts...)
}

// Explain adds what to do to a failed call of a client f dialled when the node refused the
// handshake or the two sides disagree on TLS; other errors pass unchanged.
func (f *TLS) Explain(err error) error {
	if h := f.hint(err); h != "" {
		return fmt.Errorf("%w; %s", err, h)
	}
	return err
}

func (f *TLS) hint(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	// A refused client certificate reaches the client as the server's alert, or, when the
	// client's first write wins the race, as a broken pipe or reset.
	dropped := strings.Contains(s, "preface: EOF") || strings.Contains(s, "broken pipe") || strings.Contains(s, "connection reset")
	switch {
	case f.Files.Empty() && dropped:
		return "the node may serve TLS: pass --tls-ca (and --tls-cert, --tls-key); or this is not its control port (--server takes serve's --listen address, not its data or RESP port)"
	case f.Files.Cert == "" && (dropped || strings.Contains(s, "certificate required")):
		return "the node requires a client certificate: pass --tls-cert and --tls-key"
	case strings.Contains(s, "tls:") || strings.Contains(s, "x509:"):
		return "TLS handshake failed: check that --tls-ca signed the node's certificate (and it carries the --server host), and that --tls-cert is the cluster CA's and not expired"
	}
	return ""
}
