package secure

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority (ECDSA P-256) for test clusters and benchmarks:
// what docs/p2p.md's openssl commands make, without openssl. Production clusters bring
// their own CA.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, for a CA file
}

// NewCA makes a self-signed CA valid from notBefore to notAfter.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a certificate for name, usable by both a server and a client (a node is
// both), valid for the hosts (IP addresses or DNS names) from notBefore to notAfter. It
// returns the certificate and its PKCS#8 key as PEM.
func (ca *CA) Issue(name string, hosts []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	return ca.issue(name, hosts, notBefore, notAfter, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

func (ca *CA) issue(name string, hosts []string, notBefore, notAfter time.Time, usage []x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), nil
}

// WriteFiles issues a certificate valid for a day (from an hour ago) and writes it, its
// key and the CA to dir as name.crt, name.key and ca.crt (keys mode 0600).
func (ca *CA) WriteFiles(dir, name string, hosts []string) (Files, error) {
	now := time.Now()
	c, k, err := ca.Issue(name, hosts, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, "ca.crt")}
	for _, w := range []struct {
		path string
		b    []byte
		mode os.FileMode
	}{{f.Cert, c, 0o644}, {f.Key, k, 0o600}, {f.CA, ca.PEM, 0o644}} {
		if err := os.WriteFile(w.path, w.b, w.mode); err != nil {
			return Files{}, fmt.Errorf("writing %s: %w", w.path, err)
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n.Add(n, big.NewInt(1))
}
