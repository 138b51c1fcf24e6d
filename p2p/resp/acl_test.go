package resp

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/p2p/auth"
)

// Tenant tokens through redis-cli: before AUTH every command is NOAUTH; tenant A's token
// cannot read, overwrite, delete or scan tenant B's keys (NOPERM, nothing changed); admin
// can. Skipped without redis-cli.
func TestRedisCLITenantTokens(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed (apt-get install redis-tools)")
	}
	ts, err := auth.Parse(strings.NewReader("a tenant-a-secret-0123456789 rights=read,write,delete salts=tenantA\n" +
		"b tenant-b-secret-0123456789 rights=read,write,delete salts=tenantB\n" +
		"ops admin-secret-0123456789ab rights=admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	store := newMem(1 << 20)
	addr := serve(t, &Server{Store: store, Tokens: ts})
	host, port, _ := strings.Cut(addr, ":")
	run := func(pass string, args ...string) string {
		t.Helper()
		a := []string{"-h", host, "-p", port, "--no-auth-warning"}
		if pass != "" {
			a = append(a, "-a", pass)
		}
		out, err := exec.Command(cli, append(a, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	kb, ka := "m@00000001@0@beef@tenantB", "m@00000001@0@cafe@tenantA"
	const secA, secB, secOps = "tenant-a-secret-0123456789", "tenant-b-secret-0123456789", "admin-secret-0123456789ab"
	if got := run(secB, "SET", kb, "B's value"); got != "OK\n" {
		t.Fatalf("B sets its key: %q", got)
	}
	if got := run(secA, "SET", ka, "A's value"); got != "OK\n" {
		t.Fatalf("A sets its key: %q", got)
	}
	for _, c := range []struct {
		pass string
		args []string
		want string
	}{
		{"", []string{"GET", kb}, "NOAUTH Authentication required."},
		{"", []string{"DBSIZE"}, "NOAUTH Authentication required."},
		{"not-a-token-0123456789", []string{"GET", kb}, "AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\nNOAUTH Authentication required."},
		{secA, []string{"GET", kb}, `NOPERM token a has no read right on cache_salt "tenantB"`},
		{secA, []string{"MGET", ka, kb}, `NOPERM token a has no read right on cache_salt "tenantB"`},
		{secA, []string{"EXISTS", kb}, `NOPERM token a has no read right on cache_salt "tenantB"`},
		{secA, []string{"SET", kb, "FORGED by A"}, `NOPERM token a has no write right on cache_salt "tenantB"`},
		{secA, []string{"MSET", ka, "x", kb, "FORGED by A"}, `NOPERM token a has no write right on cache_salt "tenantB"`},
		{secA, []string{"DEL", kb}, `NOPERM token a has no delete right on cache_salt "tenantB"`},
		{secA, []string{"SCAN", "0"}, "NOPERM token a has no permissions to run the 'scan' command (it needs admin)"},
		{secA, []string{"DBSIZE"}, "NOPERM token a has no permissions to run the 'dbsize' command (it needs admin)"},
		{secA, []string{"SET", "plain-generic-key", "v"}, `NOPERM token a has no write right on cache_salt ""`},
		{secA, []string{"GET", ka}, "A's value"},
		{secB, []string{"GET", kb}, "B's value"},
		{secOps, []string{"GET", kb}, "B's value"},
		{secOps, []string{"DBSIZE"}, "2"},
	} {
		if got := strings.TrimSpace(run(c.pass, c.args...)); got != c.want {
			t.Errorf("%.6s %v: %q, want %q", c.pass, c.args, got, c.want)
		}
	}
	if v, _, _ := store.Get(store.Key([]byte(kb))); string(v) != "B's value" {
		t.Fatalf("B's key after A's attempts: %q", v)
	}
	if got := run(secOps, "DEL", kb); got != "1\n" {
		t.Fatalf("admin DEL: %q", got)
	}
	// AUTH with the token's name as the user works; another name does not.
	out, _ := exec.Command(cli, "-h", host, "-p", port, "--no-auth-warning", "--user", "a", "--pass", secA, "GET", ka).CombinedOutput()
	if strings.TrimSpace(string(out)) != "A's value" {
		t.Fatalf("AUTH a TOKEN: %q", out)
	}
	out, _ = exec.Command(cli, "-h", host, "-p", port, "--no-auth-warning", "--user", "b", "--pass", secA, "GET", ka).CombinedOutput()
	if !strings.Contains(string(out), "NOAUTH") {
		t.Fatalf("AUTH b with a's token: %q", out)
	}
}
