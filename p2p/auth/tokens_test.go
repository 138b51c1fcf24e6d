package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `# tenants
tenantA  alpha-secret-0123456789  rights=read,write,delete  salts=tenantA,shared/*
tenantB  ` + "sha256:ad8e0b7e9a0f5a3ac6fb5a8c1e4d67d4d0f0c3d81a3bd5bba7d5e3e9cbf5c6a1" + `  rights=read salts=tenantB
ops      ops-secret-0123456789ab  rights=admin
nodes    peer-secret-0123456789a  rights=peer
generic  generic-secret-01234567  rights=read,write salts=""
`

func TestParseAndAllows(t *testing.T) {
	ts, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ts.Names(), " "); got != "tenantA tenantB ops nodes generic" {
		t.Fatalf("names %q", got)
	}
	a, ok := ts.Lookup("alpha-secret-0123456789")
	if !ok || a.Name != "tenantA" {
		t.Fatalf("lookup tenantA: %v %v", a, ok)
	}
	for _, c := range []struct {
		tok   string
		r     Right
		salt  string
		allow bool
	}{
		{"alpha-secret-0123456789", Read, "tenantA", true},
		{"alpha-secret-0123456789", Write, "shared/x", true},
		{"alpha-secret-0123456789", Read, "tenantB", false},
		{"alpha-secret-0123456789", Read, "tenantA2", false},
		{"alpha-secret-0123456789", Admin, "tenantA", false},
		{"alpha-secret-0123456789", Peer, "tenantA", false},
		{"ops-secret-0123456789ab", Delete, "anything", true},
		{"ops-secret-0123456789ab", Admin, "", true},
		{"peer-secret-0123456789a", Peer, "tenantB", true},
		{"peer-secret-0123456789a", Read, "tenantB", false},
		{"generic-secret-01234567", Read, "", true},
		{"generic-secret-01234567", Read, "tenantA", false},
	} {
		tok, ok := ts.Lookup(c.tok)
		if !ok {
			t.Fatalf("lookup %s failed", c.tok[:5])
		}
		if got := tok.Allows(c.r, c.salt); got != c.allow {
			t.Errorf("%s %s on %q: %v, want %v", tok.Name, c.r, c.salt, got, c.allow)
		}
	}
	for _, bad := range []string{"", "alpha-secret-012345678", "alpha-secret-0123456789 ", "sha256:ad8e"} {
		if tok, ok := ts.Lookup(bad); ok {
			t.Errorf("lookup %q found %s", bad, tok.Name)
		}
	}
	// The digest spelling finds the same token as the plain one.
	ts2, err := Parse(strings.NewReader("x " + Digest("alpha-secret-0123456789") + " rights=read salts=*\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := ts2.Lookup("alpha-secret-0123456789"); !ok || !tok.Allows(Read, "any") {
		t.Fatal("digest entry not found by its secret")
	}
}

func TestParseNamesTheBadLine(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"# only a comment\n", "no token"},
		{"a s3cret-s3cret-s3cret rights=read salts=x\nb short rights=read salts=x\n", "line 2: plain secret of 5 bytes"},
		{"a s3cret-s3cret-s3cret rights=read,fly salts=x\n", `line 1: right "fly"`},
		{"a s3cret-s3cret-s3cret\n", "line 1: want NAME SECRET"},
		{"a s3cret-s3cret-s3cret rights=read\n", "line 1: rights read name no salts="},
		{"a sha256:zz rights=admin\n", "line 1: secret sha256:"},
		{"a s3cret-s3cret-s3cret rights=admin\n\na s3cret-s3cret-s3cre2 rights=admin\n", `line 3: name "a" is already the token of line 1`},
		{"a s3cret-s3cret-s3cret rights=admin\nb s3cret-s3cret-s3cret rights=admin\n", "line 2: the same secret as line 1"},
		{"a s3cret-s3cret-s3cret rights=read salts=a@b\n", `line 1: salt "a@b"`},
		{"a s3cret-s3cret-s3cret rights=read salts=a*b*\n", `line 1: salt "a*b*"`},
		{"a s3cret-s3cret-s3cret rights=read salts=x color=red\n", `line 1: unknown field "color"`},
		{"a/b s3cret-s3cret-s3cret rights=admin\n", `line 1: name "a/b"`},
	} {
		_, err := Parse(strings.NewReader(c.file))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the secret: %v", c.file, err)
		}
	}
}

func TestLoadWarnsOnOpenMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	if err := os.WriteFile(p, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, warn, err := Load(p); err != nil || !strings.Contains(warn, "0644") {
		t.Fatalf("mode 0644: warn %q, %v", warn, err)
	}
	os.Chmod(p, 0o600)
	if _, warn, err := Load(p); err != nil || warn != "" {
		t.Fatalf("mode 0600: warn %q, %v", warn, err)
	}
	s := filepath.Join(dir, "secret")
	os.WriteFile(s, []byte("  my-token-0123456789  \nignored\n"), 0o600)
	if got, warn, err := ReadSecret(s); err != nil || got != "my-token-0123456789" || warn != "" {
		t.Fatalf("ReadSecret: %q %q %v", got, warn, err)
	}
}

func TestCredentialsAndHeader(t *testing.T) {
	md, err := Credentials{Secret: "tok-0123456789abcdef"}.GetRequestMetadata(t.Context())
	if err != nil || FromHeader(md[MetadataKey]) != "tok-0123456789abcdef" {
		t.Fatalf("%v %v", md, err)
	}
	if FromHeader("Basic abc") != "" {
		t.Fatal("a non-bearer header gave a token")
	}
}

// The example of docs/p2p.md parses, and its digests are of the tokens the doc's example
// secrets name.
func TestDocExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/p2p.md")
	if err != nil {
		t.Skip("docs/p2p.md not beside the package")
	}
	_, rest, ok := strings.Cut(string(doc), "### Token file")
	_, rest, ok2 := strings.Cut(rest, "```\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no example block under \"### Token file\" in docs/p2p.md")
	}
	ts, err := Parse(strings.NewReader(block))
	if err != nil {
		t.Fatalf("docs/p2p.md's example: %v", err)
	}
	for secret, name := range map[string]string{"tenant-a-token-Zp4X2mQ8rT1v": "tenantA", "tenant-b-token-7Hq2vL0sYx9": "tenantB",
		"ops-token-Lk3Vb9Qw2Ee7Rt": "ops", "peer-token-Hs8Nq1Xc5Za2Wp": "nodes"} {
		if tok, ok := ts.Lookup(secret); !ok || tok.Name != name {
			t.Errorf("%s: not found by its example token", name)
		}
	}
}
