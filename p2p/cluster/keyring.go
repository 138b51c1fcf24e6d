package cluster

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/memberlist"
)

// ErrKeyFile marks a malformed gossip key file; the message names the line.
var ErrKeyFile = errors.New("gossip key file")

// ParseKeys reads a gossip key file: one base64 key (standard encoding, padded or not) a
// line, of 16, 24 or 32 bytes (AES-128/192/256-GCM); '#' starts a comment line. The first
// key is the primary (what this member encrypts with); the others are accepted from peers,
// so a cluster rotates its key by listing old and new on every member, then making the new
// one first, then dropping the old one (docs/p2p.md). The error never shows a key.
func ParseKeys(r io.Reader) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256), 4096)
	var keys [][]byte
	seen := map[string]int{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		enc := base64.StdEncoding
		if !strings.HasSuffix(line, "=") && len(line)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		k, err := enc.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: not base64", ErrKeyFile, n)
		}
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("%w: line %d: a key of %d bytes; AES-GCM wants 16, 24 or 32", ErrKeyFile, n, l)
		}
		if prev, dup := seen[string(k)]; dup {
			return nil, fmt.Errorf("%w: line %d: the same key as line %d", ErrKeyFile, n, prev)
		}
		seen[string(k)] = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: a line longer than 4096 bytes", ErrKeyFile)
		}
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key in it", ErrKeyFile)
	}
	return keys, nil
}

// keyring is memberlist's keyring for the config's keys: the first the primary.
func (c Config) keyring() (*memberlist.Keyring, error) {
	if len(c.GossipKeys) == 0 {
		return nil, nil
	}
	kr, err := memberlist.NewKeyring(c.GossipKeys, c.GossipKeys[0])
	if err != nil {
		return nil, fmt.Errorf("gossip keys: %w", err)
	}
	return kr, nil
}
