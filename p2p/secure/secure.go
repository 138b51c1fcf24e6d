// Package secure holds the TLS material of rbctl's cache nodes and clients: a certificate,
// its key and the cluster's CA, read from PEM files and re-read on demand (SIGHUP) or when
// the files change, and the tls.Configs and gRPC credentials that both planes use. Servers
// always require a client certificate signed by the CA (mutual TLS, TLS 1.3); clients
// verify the server's certificate against the same CA. A handshake uses the material
// current when it starts, so a reload applies to new connections only.
package secure

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// Files names the PEM files of one party. A node needs all three; a client needs CA and
// may go without Cert and Key (a node then refuses it: nodes require client certificates).
type Files struct {
	Cert string // certificate (chain), leaf first
	Key  string // its private key
	CA   string // the CA certificates that sign the cluster's certificates
}

// Empty reports whether no file is named.
func (f Files) Empty() bool { return f.Cert == "" && f.Key == "" && f.CA == "" }

// ErrIncomplete is a set of files that lacks one a party needs.
var ErrIncomplete = errors.New("incomplete TLS files")

// CheckServer accepts all three files or none.
func (f Files) CheckServer() error {
	if f.Empty() || (f.Cert != "" && f.Key != "" && f.CA != "") {
		return nil
	}
	return fmt.Errorf("%w: a node needs certificate, key and CA together (certificate %q, key %q, CA %q)", ErrIncomplete, f.Cert, f.Key, f.CA)
}

// CheckClient accepts none, the CA alone, or all three.
func (f Files) CheckClient() error {
	switch {
	case f.Empty():
		return nil
	case f.CA == "":
		return fmt.Errorf("%w: a client certificate or key without the CA that signs the node's certificate", ErrIncomplete)
	case (f.Cert == "") != (f.Key == ""):
		return fmt.Errorf("%w: certificate %q and key %q go together", ErrIncomplete, f.Cert, f.Key)
	}
	return nil
}

// state is one loaded set of files.
type state struct {
	cert  *tls.Certificate // nil: a client without a certificate
	pool  *x509.CertPool
	stamp []byte // the files' sizes and modification times when read
}

// Material is the current TLS state of one party, safe for concurrent use.
type Material struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[state]

	reloads, reloadErrors atomic.Int64
	now                   func() time.Time // tests: the clock certificates are checked against
}

// Load reads the files; a file that cannot be read or parsed, a key that does not match
// the certificate, a certificate outside its validity period or one the CA did not sign is
// an error naming the file. log (nil: discard) receives reload events.
func Load(f Files, log *slog.Logger) (*Material, error) {
	if f.CA == "" {
		return nil, fmt.Errorf("%w: no CA file", ErrIncomplete)
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%w: certificate %q and key %q go together", ErrIncomplete, f.Cert, f.Key)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Material{files: f, log: log, now: time.Now}
	s, err := m.read()
	if err != nil {
		return nil, err
	}
	m.cur.Store(s)
	return m, nil
}

// Files returns the files m reads.
func (m *Material) Files() Files { return m.files }

// HasCert reports whether m presents a certificate.
func (m *Material) HasCert() bool { return m.cur.Load().cert != nil }

// Leaf is the certificate m presents now (nil without one).
func (m *Material) Leaf() *x509.Certificate {
	if c := m.cur.Load().cert; c != nil {
		return c.Leaf
	}
	return nil
}

// Reload re-reads the files. A set that does not load keeps the current one; the error
// says why and is logged.
func (m *Material) Reload() error {
	s, err := m.read()
	if err != nil {
		m.reloadErrors.Add(1)
		m.log.Error("TLS reload failed; keeping the certificates loaded before", "err", err)
		return err
	}
	m.cur.Store(s)
	m.reloads.Add(1)
	attrs := []any{"ca", m.files.CA}
	if s.cert != nil {
		attrs = append(attrs, "cert", m.files.Cert, "subject", s.cert.Leaf.Subject.String(), "not_after", s.cert.Leaf.NotAfter.UTC())
	}
	m.log.Info("TLS certificates reloaded", attrs...)
	return nil
}

// Reloads counts successful and failed reloads.
func (m *Material) Reloads() (ok, failed int64) { return m.reloads.Load(), m.reloadErrors.Load() }

func (m *Material) read() (*state, error) {
	f := m.files
	stamp, err := stampOf(f)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", f.CA)
	}
	s := &state{pool: pool, stamp: stamp}
	if f.Cert == "" {
		return s, nil
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate file %s with key file %s: %w", f.Cert, f.Key, err)
	}
	now := m.now()
	switch leaf := c.Leaf; {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("certificate file %s: expired at %s", f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("certificate file %s: not valid before %s", f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range c.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certificate file %s is not signed by the CA in %s: %w", f.Cert, f.CA, err)
	}
	s.cert = &c
	return s, nil
}

// stampOf is the files' sizes and modification times: what Watch compares.
func stampOf(f Files) ([]byte, error) {
	var b bytes.Buffer
	for _, p := range []struct{ what, path string }{{"certificate file", f.Cert}, {"key file", f.Key}, {"CA file", f.CA}} {
		if p.path == "" {
			continue
		}
		st, err := os.Stat(p.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
		fmt.Fprintf(&b, "%s %d %d\n", p.path, st.Size(), st.ModTime().UnixNano())
	}
	return b.Bytes(), nil
}

// CheckNodeUsage reports whether m's certificate can serve as both ends of a node's
// connections: a server to clients and peers, a client to peers. A certificate that lists
// extended key usages must list serverAuth and clientAuth (or any); one without the list may
// do both.
func (m *Material) CheckNodeUsage() error {
	leaf := m.Leaf()
	if leaf == nil {
		return fmt.Errorf("%w: no certificate", ErrIncomplete)
	}
	if len(leaf.ExtKeyUsage) == 0 {
		return nil
	}
	var server, client bool
	for _, u := range leaf.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
		client = client || u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny
	}
	if !server || !client {
		return fmt.Errorf("certificate file %s: extended key usage must include serverAuth and clientAuth (a node serves and dials peers); it allows server %v, client %v", m.files.Cert, server, client)
	}
	return nil
}
