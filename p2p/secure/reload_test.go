package secure

import (
	"context"
	"crypto/x509"
	"os"
	"syscall"
	"testing"
	"time"
)

// serverLeaf is the certificate a fresh handshake with addr sees.
func serverLeaf(t *testing.T, addr string, cli *Material) *x509.Certificate {
	t.Helper()
	leaf, err := handshake(addr, cli.ClientConfig(""))
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return leaf
}

func TestReloadReachesNewHandshakes(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "cluster")
	sf, _ := ca.WriteFiles(dir, "server", []string{"127.0.0.1"})
	srv, err := Load(sf, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := ca.WriteFiles(dir, "client", nil)
	cli, _ := Load(cf, nil)
	addr := serve(t, srv)
	first := serverLeaf(t, addr, cli)

	// Replace the files: the old handshake state stays until Reload.
	if _, err := ca.WriteFiles(dir, "server", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if got := serverLeaf(t, addr, cli); !got.Equal(first) {
		t.Fatal("the certificate changed before any reload")
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	second := serverLeaf(t, addr, cli)
	if second.Equal(first) {
		t.Fatal("a handshake after Reload still sees the old certificate")
	}

	// A broken file keeps the loaded set and says why.
	good, _ := os.ReadFile(sf.Cert)
	write(t, sf.Cert, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"))
	if err := srv.Reload(); err == nil {
		t.Fatal("a broken certificate file reloaded")
	}
	if got := serverLeaf(t, addr, cli); !got.Equal(second) {
		t.Fatal("a failed reload changed the certificate served")
	}
	if ok, failed := srv.Reloads(); ok != 1 || failed != 1 {
		t.Fatalf("reloads %d ok, %d failed; want 1 and 1", ok, failed)
	}
	write(t, sf.Cert, good)
}

func TestWatchOnSignalAndOnChange(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "cluster")
	sf, _ := ca.WriteFiles(dir, "server", []string{"127.0.0.1"})
	srv, _ := Load(sf, nil)
	cf, _ := ca.WriteFiles(dir, "client", nil)
	cli, _ := Load(cf, nil)
	addr := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { srv.Watch(ctx, 0, hup); close(done) }()

	before := serverLeaf(t, addr, cli)
	ca.WriteFiles(dir, "server", []string{"127.0.0.1"})
	hup <- syscall.SIGHUP
	waitFor(t, "a reload after SIGHUP", func() bool { return !serverLeaf(t, addr, cli).Equal(before) })
	cancel()
	<-done

	// Polling: a changed file is picked up without a signal.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go srv.Watch(ctx, 20*time.Millisecond, nil)
	before = serverLeaf(t, addr, cli)
	ca.WriteFiles(dir, "server", []string{"127.0.0.1"})
	old := time.Now().Add(-time.Minute) // as if written a while ago: not mid-write
	for _, p := range []string{sf.Cert, sf.Key, sf.CA} {
		os.Chtimes(p, old, old)
	}
	waitFor(t, "a reload after the files changed", func() bool { return !serverLeaf(t, addr, cli).Equal(before) })
}

// waitFor polls cond for up to 10 s (a bound on a wait, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not true after 10 s: %s", what)
}
