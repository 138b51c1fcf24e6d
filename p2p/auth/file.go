package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Load reads and parses a token file. warn is set when the file can be read by its group or
// by others (its secrets, or their digests, should be the node's alone).
func Load(path string) (ts *Tokens, warn string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o044 != 0 {
		warn = fmt.Sprintf("token file %s has mode %04o: readable by others than its owner (chmod 600)", path, st.Mode().Perm())
	}
	ts, err = Parse(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, warn, fmt.Errorf("%s: %w", path, err)
	}
	return ts, warn, nil
}

// ReadSecret reads a client's token from a file: its first line, blanks trimmed. warn as
// Load's.
func ReadSecret(path string) (secret, warn string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o044 != 0 {
		warn = fmt.Sprintf("token file %s has mode %04o: readable by others than its owner (chmod 600)", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxLine))
	if err != nil {
		return "", warn, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if secret = strings.TrimSpace(line); secret == "" {
		return "", warn, fmt.Errorf("%s: no token on its first line", path)
	}
	if !printable(secret) {
		return "", warn, fmt.Errorf("%s: the token has bytes outside printable ASCII", path)
	}
	return secret, warn, nil
}

// MetadataKey is the gRPC metadata key a token travels in, as "Bearer TOKEN".
const MetadataKey = "authorization"

// FromHeader returns the token of an authorization header value ("" when it holds none).
func FromHeader(v string) string {
	if s, ok := strings.CutPrefix(v, "Bearer "); ok {
		return strings.TrimSpace(s)
	}
	return ""
}

// Credentials puts a token on every gRPC call (grpc.WithPerRPCCredentials). Without TLS the
// token travels in clear: see docs/p2p.md's threat model.
type Credentials struct{ Secret string }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c Credentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if c.Secret == "" {
		return nil, errors.New("empty token")
	}
	return map[string]string{MetadataKey: "Bearer " + c.Secret}, nil
}

// RequireTransportSecurity is false: a token may be sent over plain TCP (the node's
// operator chose it; docs/p2p.md says what that exposes).
func (Credentials) RequireTransportSecurity() bool { return false }

// identityKey carries the token of an authenticated call in its context.
type identityKey struct{}

// WithToken returns ctx carrying t (the token a call presented).
func WithToken(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, identityKey{}, t)
}

// TokenOf returns the token ctx carries, or nil.
func TokenOf(ctx context.Context) *Token {
	t, _ := ctx.Value(identityKey{}).(*Token)
	return t
}
