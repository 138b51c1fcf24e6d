package clusterbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestTLSBothRunsEachModeTwice: with TLSBoth a mode runs in plain TCP and then over mutual
// TLS; both move the same chunks between peers (the workload is the same), the TLS run
// never returns wrong bytes, and the text compares the two.
func TestTLSBothRunsEachModeTwice(t *testing.T) {
	o := small(t)
	o.Modes, o.TLS = []Mode{FetchOnly}, TLSBoth
	rs, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].TLS || !rs[1].TLS {
		t.Fatalf("%d results (TLS %v); want plain then TLS", len(rs), len(rs) > 1 && rs[1].TLS)
	}
	p, s := rs[0].Total, rs[1].Total
	if s.PeerHits == 0 || s.PeerHits != p.PeerHits || s.PeerBytesIn != p.PeerBytesIn {
		t.Errorf("TLS run: %d peer hits, %d bytes in; plain: %d, %d", s.PeerHits, s.PeerBytesIn, p.PeerHits, p.PeerBytesIn)
	}
	if s.WrongChunks != 0 || s.PeerErrors != 0 || s.PeerTimeouts != 0 {
		t.Errorf("TLS run: %d wrong chunks, %d peer errors, %d timeouts", s.WrongChunks, s.PeerErrors, s.PeerTimeouts)
	}
	if rs[1].CPUSeconds <= 0 {
		t.Errorf("TLS run: CPU time %v not measured", rs[1].CPUSeconds)
	}
	var b bytes.Buffer
	if err := WriteText(&b, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "fetch-only over TLS against plain TCP") {
		t.Errorf("no TLS comparison in the text:\n%s", b.String())
	}
	t.Log(b.String())
}
