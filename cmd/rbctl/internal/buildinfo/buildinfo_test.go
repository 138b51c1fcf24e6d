package buildinfo

import (
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	b := Read("1.2.3", "0123456789abcdef0123", "2026-12-01T00:00:00Z")
	if b.Commit != "0123456789ab" || b.Date != "2026-12-01T00:00:00Z" || b.Version != "1.2.3" {
		t.Errorf("stamped: %+v", b)
	}
	if s := b.String(); !strings.HasPrefix(s, "rbctl 1.2.3 (commit 0123456789ab, built 2026-12-01T00:00:00Z, go") {
		t.Errorf("String: %q", s)
	}
	// A test binary carries no VCS stamp: unstamped fields say so.
	if u := Read("dev", "", ""); u.Commit == "" || u.Date == "" {
		t.Errorf("unstamped: %+v", u)
	}
}
