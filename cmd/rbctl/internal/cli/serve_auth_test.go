package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAuthFlagsRefuseBadInput: a malformed token or gossip key file, a missing one, or
// caps out of order are exit 1 with a message naming the flag (and the line), before
// anything is served.
func TestServeAuthFlagsRefuseBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "a.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badTokens := write("tokens.bad", "a tenant-a-secret-0123456789 rights=read salts=x\nb short rights=read salts=y\n")
	badKeys := write("keys.bad", "# keys\nAAAA\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth-file", badTokens}, "--auth-file: " + badTokens + ": token file: line 2: plain secret of 5 bytes"},
		{[]string{"--auth-file", filepath.Join(dir, "none")}, "--auth-file: open"},
		{[]string{"--gossip-key-file", badKeys}, "--gossip-key-file " + badKeys + ": gossip key file: line 2: a key of 3 bytes"},
		{[]string{"--gossip-key-file", badKeys, "--cluster", "none"}, "--gossip-key-file encrypts cluster gossip"},
		{[]string{"--max-leases", "10", "--max-leases-per-client", "11"}, "--max-leases-per-client 11 is above --max-leases 10"},
		{[]string{"--max-leases", "0"}, "--max-leases"},
		{[]string{"--resp", "127.0.0.1:0", "--resp-max-conns", "0"}, "--resp-max-conns 0: out of range"},
		{[]string{"--resp", "127.0.0.1:0", "--resp-conns-per-addr", "0"}, "--resp-conns-per-addr 0: out of range"},
		{[]string{"--resp", "127.0.0.1:0", "--resp-idle-timeout", "-1s"}, "--resp-idle-timeout -1s: out of range"},
		{[]string{"--cluster", "none", "--admission", "prefix-depth:4"}, "position"}, // was TestServeAdmission's
	} {
		code, _, se := runRbctl(t, dir, 30*time.Second, append([]string{"serve", "--listen", "127.0.0.1:0", dev}, c.args...)...)
		if code != exitError || !strings.Contains(se, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 1 with %q", c.args, code, se, c.want)
		}
		if strings.Contains(se, "tenant-a-secret") {
			t.Errorf("serve %v: the error shows a token: %q", c.args, se)
		}
	}
}

// TestServeAuthRemote: a node with --auth-file; rbctl remote presents --token-file or
// $RBCTL_TOKEN; tenant A cannot read, list or delete tenant B's key (exit 1,
// PermissionDenied, said as "refused: token ..."), no token is Unauthenticated ("wants a
// token"), admin lists. (The RESP part, NOAUTH and NOPERM, is p2p/node's TestStartAuthRESP.)
func TestServeAuthRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "a.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	const secA, secB, secOps = "tenant-a-secret-0123456789", "tenant-b-secret-0123456789", "admin-secret-0123456789ab"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("a "+secA+" rights=read,write,delete salts=tenantA\nb "+secB+" rights=read,write,delete salts=tenantB\nops "+secOps+" rights=admin\n"), 0o600)
	tokFile := func(name, secret string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(secret+"\n"), 0o600)
		return p
	}
	ta, tb := tokFile("a.tok", secA), tokFile("b.tok", secB)
	_, ctl, _ := startServe(t, dir, dev, "--cluster", "none", "--auth-file", tokens)
	remote := func(args ...string) (int, string, string) {
		return runRbctl(t, dir, 30*time.Second, append([]string{"remote"}, args...)...)
	}
	kb := []string{"--model", "m", "--hash", "00ff", "--salt", "tenantB"}
	if code, so, se := remote(append([]string{"put", "--server", ctl, "--token-file", tb, "-"}, kb...)...); code != 0 {
		t.Fatalf("B puts: exit %d %q %q", code, so, se)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"get", "--server", ctl, "--token-file", ta}, kb...), "refused: token a"},
		{append([]string{"put", "--server", ctl, "--token-file", ta, "-"}, kb...), "refused: token a"},
		{[]string{"ls", "--server", ctl, "--token-file", ta}, "refused: token a"},
		{[]string{"stats", "--server", ctl, "--token-file", ta}, "refused: token a"},
		{append([]string{"get", "--server", ctl}, kb...), "wants a token it accepts"},
	} {
		code, _, se := remote(c.args...)
		if code != exitError || !strings.Contains(se, c.want) || strings.Contains(se, secA) {
			t.Errorf("remote %v: exit %d, stderr %q; want exit 1 with %q", c.args, code, se, c.want)
		}
	}
	if code, so, se := remote(append([]string{"get", "--server", ctl, "--token-file", tb}, kb...)...); code != 0 || so != "payload\n" {
		t.Fatalf("B reads its key: exit %d %q %q", code, so, se)
	}
	t.Setenv("RBCTL_TOKEN", secOps)
	if code, so, se := remote("ls", "--server", ctl); code != 0 || !strings.Contains(so, "tenantB") {
		t.Fatalf("admin ls: exit %d %q %q", code, so, se)
	}
}
