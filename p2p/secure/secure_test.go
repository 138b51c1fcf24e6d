package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		f              Files
		server, client bool // accepted
	}{
		{Files{}, true, true},
		{Files{Cert: "c", Key: "k", CA: "a"}, true, true},
		{Files{CA: "a"}, false, true},
		{Files{Cert: "c", Key: "k"}, false, false},
		{Files{Cert: "c", CA: "a"}, false, false},
		{Files{Key: "k"}, false, false},
	} {
		if err := c.f.CheckServer(); (err == nil) != c.server || (err != nil && !errors.Is(err, ErrIncomplete)) {
			t.Errorf("%+v CheckServer: %v", c.f, err)
		}
		if err := c.f.CheckClient(); (err == nil) != c.client {
			t.Errorf("%+v CheckClient: %v", c.f, err)
		}
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "cluster"), newCA(t, "other")
	good, err := ca.WriteFiles(dir, "n", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good, nil); err != nil {
		t.Fatalf("good files: %v", err)
	}
	now := time.Now()
	expCert, expKey, _ := ca.Issue("old", nil, now.Add(-48*time.Hour), now.Add(-time.Hour))
	othCert, othKey, _ := other.Issue("o", nil, now.Add(-time.Hour), now.Add(time.Hour))
	_, key2, _ := ca.Issue("k2", nil, now.Add(-time.Hour), now.Add(time.Hour))
	p := func(n string) string { return filepath.Join(dir, n) }
	write(t, p("exp.crt"), expCert)
	write(t, p("exp.key"), expKey)
	write(t, p("oth.crt"), othCert)
	write(t, p("oth.key"), othKey)
	write(t, p("k2.key"), key2)
	write(t, p("junk.pem"), []byte("not pem\n"))
	for _, c := range []struct {
		f     Files
		names string
	}{
		{Files{Cert: p("missing.crt"), Key: good.Key, CA: good.CA}, "missing.crt"},
		{Files{Cert: good.Cert, Key: good.Key, CA: p("junk.pem")}, "junk.pem"},
		{Files{Cert: good.Cert, Key: p("k2.key"), CA: good.CA}, "k2.key"},
		{Files{Cert: p("junk.pem"), Key: good.Key, CA: good.CA}, "junk.pem"},
		{Files{Cert: p("exp.crt"), Key: p("exp.key"), CA: good.CA}, "exp.crt: expired"},
		{Files{Cert: p("oth.crt"), Key: p("oth.key"), CA: good.CA}, "oth.crt is not signed by the CA"},
	} {
		_, err := Load(c.f, nil)
		if err == nil || !strings.Contains(err.Error(), c.names) {
			t.Errorf("%+v: error %v, want one naming %q", c.f, err, c.names)
		}
	}
}

// serve answers TLS handshakes with m's server config until the test ends and returns the
// address.
func serve(t *testing.T, m *Material) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", m.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte{1}) // a byte after the handshake: the client sees a refusal on its read
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr with m's client config and returns the server's leaf, or the error
// of the handshake or of the first read (TLS 1.3 reports a refused client certificate there).
func handshake(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func TestMutualAndRefusals(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "cluster"), newCA(t, "other")
	sf, _ := ca.WriteFiles(dir, "server", []string{"127.0.0.1"})
	srv, err := Load(sf, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	cf, _ := ca.WriteFiles(dir, "client", nil)
	cli, err := Load(cf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if leaf, err := handshake(addr, cli.ClientConfig("")); err != nil || leaf.SerialNumber.Cmp(srv.Leaf().SerialNumber) != 0 {
		t.Fatalf("mutual handshake: %v", err)
	}
	if _, err := handshake(addr, cli.ClientConfig("not-in-the-cert.example")); err == nil {
		t.Error("a server name the certificate does not carry was accepted")
	}
	caOnly, _ := Load(Files{CA: sf.CA}, nil)
	if _, err := handshake(addr, caOnly.ClientConfig("")); err == nil {
		t.Error("a client without a certificate was accepted")
	}
	odir := t.TempDir()
	of, _ := other.WriteFiles(odir, "intruder", nil)
	pair, err := tls.LoadX509KeyPair(of.Cert, of.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := caOnly.ClientConfig("")
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	if _, err := handshake(addr, cfg); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
}

func TestCheckNodeUsage(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "cluster")
	both, _ := ca.WriteFiles(dir, "both", nil)
	m, err := Load(both, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckNodeUsage(); err != nil {
		t.Errorf("serverAuth+clientAuth: %v", err)
	}
	now := time.Now()
	c, k, _ := ca.issue("server-only", nil, now.Add(-time.Hour), now.Add(time.Hour), []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth})
	p := filepath.Join(dir, "server-only")
	write(t, p+".crt", c)
	write(t, p+".key", k)
	m, err = Load(Files{Cert: p + ".crt", Key: p + ".key", CA: both.CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckNodeUsage(); err == nil || !strings.Contains(err.Error(), "server-only.crt") {
		t.Errorf("serverAuth only: %v; want an error naming the file", err)
	}
}
