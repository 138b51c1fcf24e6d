package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/p2ptest"
)

func TestParseKeys(t *testing.T) {
	k16, k32 := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 32)
	file := "# primary first\n" + base64.StdEncoding.EncodeToString(k32) + "\n\n" + base64.RawStdEncoding.EncodeToString(k16) + "\n"
	keys, err := ParseKeys(strings.NewReader(file))
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], k32) || !bytes.Equal(keys[1], k16) {
		t.Fatalf("%x %v", keys, err)
	}
	for _, c := range []struct{ file, want string }{
		{"", "no key"},
		{base64.StdEncoding.EncodeToString(k16) + "\n!!!\n", "line 2: not base64"},
		{base64.StdEncoding.EncodeToString(make([]byte, 20)) + "\n", "line 1: a key of 20 bytes"},
		{base64.StdEncoding.EncodeToString(k16) + "\n" + base64.StdEncoding.EncodeToString(k16) + "\n", "line 2: the same key as line 1"},
	} {
		if _, err := ParseKeys(strings.NewReader(c.file)); err == nil || !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	f.Add("# c\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n")
	f.Add("AAAA\n")
	f.Fuzz(func(t *testing.T, file string) {
		keys, err := ParseKeys(strings.NewReader(file))
		if err != nil {
			return
		}
		for _, k := range keys {
			if l := len(k); l != 16 && l != 24 && l != 32 {
				t.Fatalf("key of %d bytes accepted", l)
			}
		}
		if _, err := (Config{GossipKeys: keys}).keyring(); err != nil {
			t.Fatalf("parsed keys refused by memberlist: %v", err)
		}
	})
}

// Gossip encrypted with a keyring, members in their own namespaces: a member without the
// key, or with another key, does not join and sees no one; one with the key joins; a
// cluster half-way through a rotation (old,new on one member, new,old on the other) holds.
func TestGossipKeyAcrossNamespaces(t *testing.T) {
	nt := p2ptest.NewNet(t, 5)
	old, nw, other := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{8}, 32), bytes.Repeat([]byte{9}, 16)
	join := func(i int, keys [][]byte, seeds ...string) (*Cluster, error) {
		node := nt.Nodes[i]
		cfg := Config{Name: fmt.Sprintf("n%d", i), Cluster: "keyed", Timing: TimingFast, NoRegistry: true,
			BindAddr: node.IP, BindPort: 7946, Control: node.IP + ":7000", Data: node.IP + ":7001",
			ExpectedKeys: 1000, Dial: nt.Dialer(i), Seeds: seeds, GossipKeys: keys}
		var c *Cluster
		err := nt.Do(i, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			c, err = Join(ctx, cfg)
			return err
		})
		if err == nil {
			t.Cleanup(func() { c.Shutdown() })
		}
		return c, err
	}
	seed := nt.Nodes[0].IP + ":7946"
	n0, err := join(0, [][]byte{old, nw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := join(1, nil, seed); err == nil {
		t.Fatal("a member without the key joined")
	} else {
		t.Logf("no key: %v", err)
	}
	if _, err := join(2, [][]byte{other}, seed); err == nil {
		t.Fatal("a member with another key joined")
	} else {
		t.Logf("other key: %v", err)
	}
	n3, err := join(3, [][]byte{old, nw}, seed) // new key installed, old still primary
	if err != nil {
		t.Fatalf("with the key: %v", err)
	}
	n4, err := join(4, [][]byte{nw, old}, seed) // rotated: encrypts with the new key
	if err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	eventually(t, 15*time.Second, "n0 sees n3 and n4", seesPeers(n0, "n3,n4"))
	eventually(t, 15*time.Second, "n4 sees n0 and n3", seesPeers(n4, "n0,n3"))
	n3.Admitted(42)
	eventually(t, 10*time.Second, "n0 learns n3's key through encrypted gossip", func() bool { return holds(n0, 42, "n3") })
	if got := n0.Peers(); len(got) != 2 {
		t.Fatalf("n0 sees %v: an unkeyed member got in", names(got))
	}
}
