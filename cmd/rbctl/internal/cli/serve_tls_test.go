package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/p2ptest"
	"github.com/rbctl/rbctl/p2p/secure"
)

// TestServeTLSFlagsRefusedBeforeAnythingOpens: a partial set of --tls-* flags, and files
// that do not belong together, are exit-1 errors naming the flag or the file, given before
// the (absent) device is opened.
func TestServeTLSFlagsRefusedBeforeAnythingOpens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	ca, _ := secure.NewCA("cluster", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	f, err := ca.WriteFiles(dir, "node", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ca.WriteFiles(dir, "other", []string{"127.0.0.1"})
	dev := filepath.Join(dir, "absent.img")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", f.Cert}, "only --tls-cert given"},
		{[]string{"--tls-cert", f.Cert, "--tls-key", f.Key}, "only --tls-cert, --tls-key given"},
		{[]string{"--tls-ca", f.CA}, "go together"},
		{[]string{"--tls-cert", f.Cert, "--tls-key", g.Key, "--tls-ca", f.CA}, "other.key"},
		{[]string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", filepath.Join(dir, "nope.pem")}, "nope.pem"},
	} {
		code, _, se := runRbctl(t, dir, 30*time.Second, append([]string{"serve", dev, "--cluster", "none"}, c.args...)...)
		if code != 1 || !strings.Contains(se, c.want) || strings.Contains(se, "absent.img") {
			t.Errorf("serve %v: exit %d, %q; want exit 1 naming %q before the device", c.args, code, se, c.want)
		}
	}
	for _, c := range [][]string{{"--tls-cert", f.Cert, "--tls-key", f.Key}, {"--tls-key", f.Key, "--tls-ca", f.CA}} {
		code, _, se := runRbctl(t, dir, 30*time.Second, append([]string{"remote", "stats", "--server", "127.0.0.1:1"}, c...)...)
		if code != 1 || !strings.Contains(se, "--tls-") {
			t.Errorf("remote %v: exit %d, %q; want exit 1 naming the flags", c, code, se)
		}
	}
}

// TestServeTLSAcrossNamespaces (root with ip; skipped otherwise): two nodes serve with
// --tls-* in namespaces of their own, B with A as its peer; a client in a third namespace
// puts to A and gets through B (a peer fetch over TLS on both planes). Without a client
// certificate, or without TLS at all, remote is refused with exit 1 and a hint. SIGHUP
// after A's files were replaced: new handshakes see A's new certificate, and A keeps
// serving. A node without --tls-* says once that it is plain TCP.
func TestServeTLSAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	nt := p2ptest.NewNet(t, 3)
	dir := t.TempDir()
	ca, err := secure.NewCA("cluster", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fa, _ := ca.WriteFiles(dir, "a", []string{nt.Nodes[0].IP, "a.test"})
	fb, _ := ca.WriteFiles(dir, "b", []string{nt.Nodes[1].IP})
	fc, _ := ca.WriteFiles(dir, "client", nil)
	tlsArgs := func(f secure.Files) []string {
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
	}
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, dev := range []string{a, b} {
		if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
			t.Fatalf("format: exit %d: %s", code, se)
		}
	}
	ctx := context.Background()
	ctlA, ctlB := nt.Nodes[0].IP+":7470", nt.Nodes[1].IP+":7470"
	logA := &lockedBuf{}
	cmdA := nt.Command(ctx, 0, os.Args[0], append([]string{"serve", a, "--listen", ctlA, "--json", "--cluster", "none"}, tlsArgs(fa)...)...)
	cmdA.Stderr = logA
	srvA, _, _ := startServeCmd(t, dir, cmdA)
	startServeCmd(t, dir, nt.Command(ctx, 1, os.Args[0], append([]string{"serve", b, "--listen", ctlB, "--json",
		"--peers", ctlA, "--peer-timeout", "2s", "--fetch-timeout", "5s"}, tlsArgs(fb)...)...))
	if strings.Contains(logA.String(), "plain TCP") {
		t.Errorf("a TLS node says it is plain TCP: %q", logA.String())
	}
	remote := func(args ...string) (int, string, string) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := nt.Command(ctx, 2, os.Args[0], append([]string{"remote"}, args...)...)
		cmd.Env = append(os.Environ(), envAsMain+"=1")
		cmd.Stdin = strings.NewReader("payload\n")
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), so.String(), se.String()
		} else if err != nil {
			t.Fatalf("remote %v: %v", args, err)
		}
		return 0, so.String(), se.String()
	}
	withTLS := func(args ...string) []string { return append(args, tlsArgs(fc)...) }
	if code, _, se := remote(withTLS("put", "--server", ctlA, "--model", "m", "--hash", "0a", "-")...); code != 0 {
		t.Fatalf("remote put over TLS: exit %d: %s", code, se)
	}
	code, out, se := remote(withTLS("get", "--server", ctlB, "--model", "m", "--hash", "0a", "--json")...)
	if code != 0 || !strings.Contains(out, `"source": "peer"`) || !strings.Contains(out, `"payload": "cGF5bG9hZAo="`) {
		t.Fatalf("get through b over TLS: exit %d, %s %s", code, out, se)
	}

	code, _, se = remote("get", "--server", ctlA, "--model", "m", "--hash", "0a", "--tls-ca", fc.CA)
	if code != 1 || !strings.Contains(se, "requires a client certificate") {
		t.Errorf("remote with --tls-ca only: exit %d, %q; want 1 and the hint", code, se)
	}
	t.Logf("remote with --tls-ca only: %s", se)
	code, _, se = remote("get", "--server", ctlA, "--model", "m", "--hash", "0a")
	if code != 1 || !strings.Contains(se, "may serve TLS") {
		t.Errorf("plain remote of a TLS node: exit %d, %q; want 1 and the hint", code, se)
	}
	t.Logf("plain remote of a TLS node: %s", se)

	// Reload: new files, SIGHUP, the next handshake sees them.
	leaf := func() *x509.Certificate {
		raw, err := nt.Dialer(2)("tcp", ctlA, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		pair, _ := tls.LoadX509KeyPair(fc.Cert, fc.Key)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.PEM)
		c := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "a.test", Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState().PeerCertificates[0]
	}
	before := leaf()
	if _, err := ca.WriteFiles(dir, "a", []string{nt.Nodes[0].IP, "a.test"}); err != nil {
		t.Fatal(err)
	}
	srvA.Process.Signal(syscall.SIGHUP)
	for end := time.Now().Add(10 * time.Second); leaf().Equal(before); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("A still presents its old certificate 10 s after SIGHUP; log %q", logA.String())
		}
	}
	// The log line follows the swap: wait for it rather than race it.
	for end := time.Now().Add(10 * time.Second); !strings.Contains(logA.String(), "TLS certificates reloaded"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("A's log does not tell of the reload: %q", logA.String())
			break
		}
	}
	if code, _, se := remote(withTLS("stats", "--server", ctlA)...); code != 0 {
		t.Fatalf("A after SIGHUP: remote stats exit %d: %s", code, se)
	}

	// Without --tls-*: one line says so.
	logP := &lockedBuf{}
	p := filepath.Join(dir, "p.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", p); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	cmdP := nt.Command(ctx, 2, os.Args[0], "serve", p, "--listen", nt.Nodes[2].IP+":7470", "--json", "--cluster", "none")
	cmdP.Stderr = logP
	startServeCmd(t, dir, cmdP)
	if n := strings.Count(logP.String(), "serve: plain TCP: no --tls-cert/--tls-key/--tls-ca given"); n != 1 {
		t.Errorf("plain node's log has the plain-TCP line %d times: %q", n, logP.String())
	}
}
