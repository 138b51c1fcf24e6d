package cli

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// TestServeAuthRemoteAndRESP: a node with --auth-file; rbctl remote presents --token-file
// or $RBCTL_TOKEN; tenant A cannot read, list or delete tenant B's key (exit 1,
// PermissionDenied), no token is Unauthenticated, admin lists; over --resp, redis-cli gets
// NOAUTH before AUTH and NOPERM for B's key with A's token.
func TestServeAuthRemoteAndRESP(t *testing.T) {
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
	ra := freeAddr(t)
	_, ctl, _ := startServe(t, dir, dev, "--cluster", "none", "--auth-file", tokens, "--resp", ra)
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
		{append([]string{"get", "--server", ctl, "--token-file", ta}, kb...), "PermissionDenied"},
		{append([]string{"put", "--server", ctl, "--token-file", ta, "-"}, kb...), "PermissionDenied"},
		{[]string{"ls", "--server", ctl, "--token-file", ta}, "PermissionDenied"},
		{[]string{"stats", "--server", ctl, "--token-file", ta}, "PermissionDenied"},
		{append([]string{"get", "--server", ctl}, kb...), "Unauthenticated"},
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

	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed: RESP part skipped")
	}
	h, p, _ := net.SplitHostPort(ra)
	redis := func(args ...string) string {
		out, _ := exec.Command(cli, append([]string{"-h", h, "-p", p, "--no-auth-warning"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	key := "m@00000000@0@00ff@tenantB" // a tenant B key in LMCache's native spelling
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", key}, "NOAUTH Authentication required."},
		{[]string{"-a", secB, "SET", key, "B's value"}, "OK"},
		{[]string{"-a", secA, "GET", key}, `NOPERM token a has no read right on cache_salt "tenantB"`},
		{[]string{"-a", secA, "DEL", key}, `NOPERM token a has no delete right on cache_salt "tenantB"`},
		{[]string{"-a", secA, "SET", key, "FORGED by A"}, `NOPERM token a has no write right on cache_salt "tenantB"`},
		{[]string{"-a", secB, "GET", key}, "B's value"},
	} {
		if got := redis(c.args...); got != c.want {
			t.Errorf("redis-cli %v: %q, want %q", c.args[len(c.args)-2:], got, c.want)
		}
	}
	// A wrong RESP password counts in the node's auth_failed (with the control plane's) and
	// in resp_auth_failed; remote stats and INFO show both.
	authFailed := func() (int64, int64) {
		code, so, se := remote("stats", "--server", ctl, "--json")
		var st struct{ Counters map[string]int64 }
		if code != 0 || json.Unmarshal([]byte(so), &st) != nil {
			t.Fatalf("remote stats: exit %d %q", code, se)
		}
		return st.Counters["auth_failed"], st.Counters["resp_auth_failed"]
	}
	all0, resp0 := authFailed()
	redis("-a", "not-a-token-0123456789", "PING")
	if all, rf := authFailed(); all != all0+1 || rf != resp0+1 {
		t.Errorf("after a wrong RESP password: auth_failed %d -> %d, resp_auth_failed %d -> %d", all0, all, resp0, rf)
	}
	if info := redis("-a", secOps, "INFO"); !strings.Contains(info, "rbctl_resp_auth_failed:1") || !strings.Contains(info, "rbctl_auth_failed:") {
		t.Errorf("INFO:\n%s", info)
	}
}

// TestServeGossipKeyFile: two nodes with the same --gossip-key-file find each other through
// the machine's registry; a third without it stays alone and is not listed by them.
func TestServeGossipKeyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "gossip.keys")
	os.WriteFile(keys, []byte("# primary\nq83vEjHKIv7Vv3fOD8eX3rZ4n7qW0cFz3jV0ZcGUl1w=\n"), 0o600)
	var ctls []string
	for i, extra := range [][]string{{"--gossip-key-file", keys}, {"--gossip-key-file", keys}, nil} {
		dev := filepath.Join(dir, string(rune('a'+i))+".img")
		mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
		_, ctl, _ := startServe(t, dir, append([]string{dev, "--cluster", "keyed", "--node-name", "n" + string(rune('0'+i))}, extra...)...)
		ctls = append(ctls, ctl)
	}
	members := func(ctl string) string {
		_, so, _ := runRbctl(t, dir, 30*time.Second, "remote", "stats", "--server", ctl, "--json")
		var st struct{ Counters map[string]int64 }
		json.Unmarshal([]byte(so), &st)
		var names []string
		for k := range st.Counters {
			if n, ok := strings.CutSuffix(k, "/state"); ok {
				names = append(names, strings.TrimPrefix(n, "member/"))
			}
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	for end := time.Now().Add(30 * time.Second); members(ctls[0]) != "n1" || members(ctls[1]) != "n0"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("keyed nodes: n0 sees %q, n1 sees %q; want each other", members(ctls[0]), members(ctls[1]))
		}
	}
	time.Sleep(2 * time.Second) // the registry has shown n2 to the others by now
	if m0, m2 := members(ctls[0]), members(ctls[2]); m0 != "n1" || m2 != "" {
		t.Fatalf("the node without the key: n0 sees %q, n2 sees %q", m0, m2)
	}
}
