// Package auth is the tenant-scoped access of an rbctl cache node: a token file names each
// token, the rights it carries (read, write, delete, admin, peer) and the cache_salt values
// or prefixes it may touch; a node looks up the token a request presents (gRPC metadata,
// the RESP password) in constant time and refuses what lies outside its scope. The file
// format is documented in docs/p2p.md ("Access control"). The package holds no secret in
// the clear: a plain token of the file is kept as its SHA-256 digest.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Right is one thing a token may do; a token holds a set of them.
type Right uint8

const (
	Read   Right = 1 << iota // get, exists, lookup-and-lock, unlock
	Write                    // put
	Delete                   // delete (not forced)
	Admin                    // everything, on every salt: list, stats, forced delete
	Peer                     // the peer service (another node's lookup-and-lock and unlock), every salt
)

var rightNames = []struct {
	r    Right
	name string
}{{Read, "read"}, {Write, "write"}, {Delete, "delete"}, {Admin, "admin"}, {Peer, "peer"}}

func (r Right) String() string {
	var out []string
	for _, n := range rightNames {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// MinTokenBytes is the shortest plain token a file may hold (a token is a password that
// gossip and logs never see: 16 random bytes, base64, are 22 characters).
const MinTokenBytes = 16

// MaxLine bounds one line of a token file.
const MaxLine = 64 << 10

// Token is one entry of a token file. It holds the secret's digest, never the secret.
type Token struct {
	Name   string
	Rights Right
	// Salts are the cache_salt values the keyed rights apply to; one ending in '*' is a
	// prefix, "*" alone every salt, "" the keys without a salt.
	Salts  []string
	digest [sha256.Size]byte
}

// Allows reports whether the token may use right r on keys with this cache_salt. Admin
// allows everything; Peer allows the peer service on every salt.
func (t *Token) Allows(r Right, salt string) bool {
	if t == nil {
		return false
	}
	if t.Rights&Admin != 0 {
		return true
	}
	if t.Rights&r != r {
		return false
	}
	if r == Peer {
		return true
	}
	for _, s := range t.Salts {
		if p, ok := strings.CutSuffix(s, "*"); ok && strings.HasPrefix(salt, p) || s == salt {
			return true
		}
	}
	return false
}

// Tokens is a parsed token file.
type Tokens struct{ list []*Token }

// Len is the number of tokens.
func (ts *Tokens) Len() int { return len(ts.list) }

// Names lists the tokens' names in file order.
func (ts *Tokens) Names() []string {
	out := make([]string, len(ts.list))
	for i, t := range ts.list {
		out[i] = t.Name
	}
	return out
}

// Lookup returns the token whose secret is secret. It compares the secret's SHA-256 with
// every entry's digest in constant time and looks at every entry whatever it finds, so its
// time says nothing about the secret.
func (ts *Tokens) Lookup(secret string) (*Token, bool) {
	if ts == nil || secret == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(secret))
	var found *Token
	for _, t := range ts.list {
		if subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1 {
			found = t
		}
	}
	return found, found != nil
}

// ErrFormat marks a malformed token file; the message names the line.
var ErrFormat = errors.New("token file")

// Parse reads a token file: one token a line, `NAME SECRET rights=R[,R...] [salts=S[,S...]]`,
// fields separated by blanks; '#' starts a comment line. SECRET is `sha256:` and 64 hex
// digits (the digest of the token) or the token itself (at least MinTokenBytes printable
// bytes). A malformed line is an error naming its number; nothing of the file is used then.
func Parse(r io.Reader) (*Tokens, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), MaxLine)
	ts := &Tokens{}
	names := map[string]int{}
	digests := map[[sha256.Size]byte]int{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		t, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrFormat, n, err)
		}
		if prev, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("%w: line %d: name %q is already the token of line %d", ErrFormat, n, t.Name, prev)
		}
		if prev, dup := digests[t.digest]; dup {
			return nil, fmt.Errorf("%w: line %d: the same secret as line %d", ErrFormat, n, prev)
		}
		names[t.Name], digests[t.digest] = n, n
		ts.list = append(ts.list, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrFormat, MaxLine)
		}
		return nil, err
	}
	if len(ts.list) == 0 {
		return nil, fmt.Errorf("%w: no token in it", ErrFormat)
	}
	return ts, nil
}

func parseLine(line string) (*Token, error) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return nil, errors.New("want NAME SECRET rights=... [salts=...]")
	}
	t := &Token{Name: f[0]}
	if !validName(t.Name) {
		return nil, fmt.Errorf("name %q is not 1-64 of [A-Za-z0-9._-]", t.Name)
	}
	if hx, ok := strings.CutPrefix(f[1], "sha256:"); ok {
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) != sha256.Size {
			return nil, errors.New("secret sha256: wants 64 hex digits")
		}
		copy(t.digest[:], b)
	} else {
		if len(f[1]) < MinTokenBytes {
			return nil, fmt.Errorf("plain secret of %d bytes; at least %d", len(f[1]), MinTokenBytes)
		}
		if !printable(f[1]) {
			return nil, errors.New("plain secret has bytes outside printable ASCII")
		}
		t.digest = sha256.Sum256([]byte(f[1]))
	}
	var haveRights, haveSalts bool
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("field %q is not KEY=VALUE", clip(kv))
		case k == "rights" && !haveRights:
			haveRights = true
			for _, name := range strings.Split(v, ",") {
				r, ok := rightByName(name)
				if !ok {
					return nil, fmt.Errorf("right %q is none of read, write, delete, admin, peer", clip(name))
				}
				t.Rights |= r
			}
		case k == "salts" && !haveSalts:
			haveSalts = true
			for _, s := range strings.Split(v, ",") {
				if s == `""` {
					s = ""
				} else if s == "" || strings.ContainsAny(s, "@\"") || strings.Contains(strings.TrimSuffix(s, "*"), "*") || !printable(s) {
					return nil, fmt.Errorf("salt %q: want a cache_salt, a prefix ending in '*', '*' or \"\"", clip(s))
				}
				t.Salts = append(t.Salts, s)
			}
		case k == "rights" || k == "salts":
			return nil, fmt.Errorf("%s= given twice", k)
		default:
			return nil, fmt.Errorf("unknown field %q (rights=, salts=)", clip(k))
		}
	}
	if !haveRights {
		return nil, errors.New("no rights= field")
	}
	if t.Rights&(Read|Write|Delete) != 0 && t.Rights&Admin == 0 && len(t.Salts) == 0 {
		return nil, fmt.Errorf("rights %s name no salts= they apply to", t.Rights)
	}
	return t, nil
}

func rightByName(s string) (Right, bool) {
	for _, n := range rightNames {
		if n.name == s {
			return n.r, true
		}
	}
	return 0, false
}

func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// clip keeps an echoed field short and printable in an error (never a secret: fields after
// the second only).
func clip(s string) string {
	b := []byte(s)
	if len(b) > 40 {
		b = append(b[:40:40], "..."...)
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// Digest is the `sha256:HEX` spelling of a token for a token file.
func Digest(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(d[:])
}
