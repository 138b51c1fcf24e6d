package dataplane

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/secure"
)

func tlsMaterial(t *testing.T) (srv, cli *secure.Material) {
	t.Helper()
	ca, err := secure.NewCA("cluster", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	load := func(name string, hosts ...string) *secure.Material {
		f, err := ca.WriteFiles(dir, name, hosts)
		if err != nil {
			t.Fatal(err)
		}
		m, err := secure.Load(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return load("server", "127.0.0.1"), load("client")
}

// TestTLSFetchAndMismatches: a fetch over TLS returns the chunks; a plain client of a TLS
// server and a TLS client of a plain server fail their handshake with an error that says
// so, and the TLS server counts the failure.
func TestTLSFetchAndMismatches(t *testing.T) {
	srvM, cliM := tlsMaterial(t)
	src := mapSource{[][]byte{bytes.Repeat([]byte{1}, 4096), []byte("second")}}
	s, addr := serve(t, src, ServerConfig{MaxChunk: 64 << 10, TLS: srvM.ServerConfig()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := DialTLS(ctx, addr, cliM.ClientConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, 2)
	if err := c.Fetch(ctx, 7, wants(src.chunks), func(i int, p []byte) { got[i] = p }); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := range got {
		if !bytes.Equal(got[i], src.chunks[i]) {
			t.Fatalf("chunk %d differs", i)
		}
	}

	if _, err := fetch(t, addr, 7, wants(src.chunks)); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("plain client of a TLS server: %v; want an error that names TLS", err)
	} else {
		t.Log(err)
	}
	waitTLSFailed := time.Now().Add(5 * time.Second)
	for s.Stats().TLSFailed == 0 && time.Now().Before(waitTLSFailed) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Stats().TLSFailed != 1 || s.Stats().Chunks != 2 {
		t.Errorf("server stats %+v; want 1 failed TLS handshake, 2 chunks", s.Stats())
	}

	_, plain := serve(t, src, ServerConfig{MaxChunk: 64 << 10})
	if _, err := DialTLS(ctx, plain, cliM.ClientConfig("")); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("TLS client of a plain server: %v; want an error that names TLS", err)
	} else {
		t.Log(err)
	}
}
