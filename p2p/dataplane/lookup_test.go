package dataplane

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// keySource is a leaseSource that leases by key: keys "k0".."kN-1" name its chunks, the
// token "peer" is the only one it takes, and each lookup's lease is 7.
type keySource struct {
	*leaseSource
	asked [][]string
}

func (s *keySource) LeaseKeys(_ netip.Addr, token string, keys []string) (uint64, int, Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, keys)
	if token != "peer" {
		return 0, 0, StatusRefused
	}
	n := 0
	for n < len(keys) && n < len(s.chunks) && keys[n] == "k"+string(rune('0'+n)) {
		n++
	}
	if n == 0 {
		return 0, 0, StatusOK
	}
	s.granted = true
	return 7, n, StatusOK
}

// dialFor dials addr for the length of the test, within 10 s per test.
func dialFor(t *testing.T, addr string) (context.Context, *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

func newKeySource(chunks [][]byte) *keySource {
	return &keySource{leaseSource: newLeaseSource(chunks)}
}

func TestLookupRoundTrip(t *testing.T) {
	b, err := AppendLookup(nil, "tok", []string{"a", "bb"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRequest(bytes.NewReader(b))
	if err != nil || r.Token != "tok" || !slices.Equal(r.Keys, []string{"a", "bb"}) || r.Indexes != nil || r.Lease != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, bad := range []struct {
		name  string
		token string
		keys  []string
	}{{"no keys", "", nil}, {"an empty key", "", []string{""}}, {"257 keys", "", make([]string, 257)},
		{"a long token", string(make([]byte, MaxTokenBytes+1)), []string{"k"}},
		{"more than MaxLookupBytes", "", []string{string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)),
			string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)),
			string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)),
			string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000)),
			string(make([]byte, 60000)), string(make([]byte, 60000)), string(make([]byte, 60000))}}} {
		if _, err := AppendLookup(nil, bad.token, bad.keys); err == nil {
			t.Fatalf("%s: encoded", bad.name)
		}
	}
	// A request whose keys claim more than MaxLookupBytes is refused before their bytes
	// arrive: the decoder has read only the head and the lengths.
	var claim []byte
	claim = append(claim, reqLookup, 0, 20, 0, 0, 0, 0, 0)
	for range 17 {
		claim = append(claim, 0xff, 0xff)
		claim = append(claim, make([]byte, 0xffff)...)
	}
	if _, err := ReadRequest(bytes.NewReader(claim)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a lookup of more than %d bytes: %v", MaxLookupBytes, err)
	}
}

// A lookup request: the leading keys the source holds come back as chunks 0.., the rest
// "not held", the lease is released; a wrong token is "refused" for every key and leases
// nothing; the connection stays in step for a plain fetch after them.
func TestLookupRequests(t *testing.T) {
	src := newKeySource([][]byte{bytes.Repeat([]byte{1}, 5000), []byte("second")})
	s, addr := serve(t, src, ServerConfig{MaxChunk: 64 << 10})
	ctx, c := dialFor(t, addr)
	if !c.TakesLookups() {
		t.Fatal("a server over a KeyLeaser does not announce lookup requests")
	}
	ask := func(token string, keys ...string) []Frame {
		t.Helper()
		if err := c.SendLookup(ctx, token, keys); err != nil {
			t.Fatal(err)
		}
		idx := make([]uint32, len(keys))
		for i := range idx {
			idx[i] = uint32(i)
		}
		f, err := c.ReceiveAll(ctx, idx, 64<<10)
		if err != nil || len(f) != len(keys) {
			t.Fatalf("%d frames, %v", len(f), err)
		}
		return f
	}
	f := ask("peer", "k0", "k1", "x", "k3")
	for i := range 2 {
		if f[i].Status != StatusOK || !bytes.Equal(f[i].Payload, src.chunks[i]) || f[i].CRC != Checksum(src.chunks[i]) {
			t.Fatalf("chunk %d: %+v", i, f[i].ChunkHeader)
		}
	}
	if f[2].Status != StatusMiss || f[3].Status != StatusMiss || f[3].Index != 3 {
		t.Fatalf("after the first key not held: %+v %+v", f[2].ChunkHeader, f[3].ChunkHeader)
	}
	if f := ask("peer", "nothing"); f[0].Status != StatusMiss {
		t.Fatalf("a first key not held: %+v", f[0].ChunkHeader)
	}
	if f := ask("stranger", "k0", "k1"); f[0].Status != StatusRefused || f[1].Status != StatusRefused || f[0].Payload != nil {
		t.Fatalf("a wrong token: %+v %+v", f[0].ChunkHeader, f[1].ChunkHeader)
	}
	eventually(t, "one lease released", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return slices.Equal(src.released, []uint64{7})
	})
	if st := s.Stats(); st.Requests != 3 || st.Lookups != 3 || st.LookupsRefused != 1 || st.BadFrames != 0 || st.Chunks != 2 {
		t.Fatalf("stats %+v", st)
	}
	got := make([][]byte, 2)
	if err := c.Fetch(ctx, 7, wants(src.chunks), func(i int, p []byte) { got[i] = p }); err != nil || !bytes.Equal(got[1], src.chunks[1]) {
		t.Fatalf("fetch after: %v", err)
	}
}

// NoLookups: the server does not announce lookup requests, the client will not send one,
// and one sent anyway is a bad frame that closes the connection.
func TestNoLookups(t *testing.T) {
	s, addr := serve(t, newKeySource([][]byte{[]byte("x")}), ServerConfig{MaxChunk: 1024, NoLookups: true})
	ctx, c := dialFor(t, addr)
	if c.TakesLookups() || !c.TakesFlags() {
		t.Fatalf("features %#x", c.features)
	}
	if err := c.SendLookup(ctx, "peer", []string{"k0"}); !errors.Is(err, ErrFrame) {
		t.Fatalf("a lookup to a server that does not take them: %v", err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b, _ := AppendLookup(appendHello(nil), "peer", []string{"k0"})
	if _, err := raw.Write(b); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ack [helloAckLen]byte
	if _, err := raw.Read(ack[:]); err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Read(ack[:]); n != 0 || err == nil {
		t.Fatalf("the connection was not closed: %d bytes, %v", n, err)
	}
	eventually(t, "a bad frame counted", func() bool { return s.Stats().BadFrames == 1 })
}
