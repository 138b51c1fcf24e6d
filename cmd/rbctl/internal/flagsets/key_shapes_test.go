package flagsets

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

// keyFlags parses args as put/get/rm's key flags.
func keyFlags(t *testing.T, args ...string) *Key {
	t.Helper()
	var k Key
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	k.Add(cmd)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return &k
}

// Issue 29's keys through the flags: --key takes every LMCache shape byte for byte,
// --group builds the object-group shape (group 0 too), --rank takes ranks past 32 bits,
// --native-key names the raw-block key of a native-connector key.
func TestKeyFlagsTakeEveryLMCacheShape(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		salt string
	}{
		{[]string{"--key", "m@0x00000000@1@00ff"}, "m@0x00000000@1@00ff", ""},
		{[]string{"--key", "m@0x00000000@10@00ff"}, "m@0x00000000@10@00ff", ""},
		{[]string{"--key", "my%2Fmodel@0x00000001@0@deadbeef@tenant"}, "my%2Fmodel@0x00000001@0@deadbeef@tenant", "tenant"},
		{[]string{"--key", "m@0x100030803@0@00ff@rag:a"}, "m@0x100030803@0@00ff@rag:a", "rag:a"},
		{[]string{"--key", "m@0x100030803@00ff"}, "m@0x100030803@00ff", ""},
		{[]string{"--key", "my/model@00000001@0@deadbeef@tenant"}, "my/model@00000001@0@deadbeef@tenant", "tenant"},
		{[]string{"--model", "m", "--hash", "00ff", "--group", "0"}, "m@0x00000000@0@00ff", ""},
		{[]string{"--model", "m", "--hash", "00ff", "--group", "16", "--salt", "ab"}, "m@0x00000000@10@00ff@ab", "ab"},
		{[]string{"--model", "m", "--rank", "0x100030803", "--hash", "00ff"}, "m@0x100030803@00ff", ""},
		{[]string{"--native-key", "my/model@00000001@0@deadbeef@tenant"}, "my%2Fmodel@0x00000001@0@deadbeef@tenant", "tenant"},
	} {
		k := keyFlags(t, c.args...)
		if err := k.Precheck(); err != nil {
			t.Errorf("%v: Precheck %v", c.args, err)
			continue
		}
		key, err := k.Build(engine.NamespaceObject)
		if err != nil || key.String() != c.want || key.CacheSalt() != c.salt {
			t.Errorf("%v: Build = %q (salt %q) %v, want %q", c.args, key.String(), key.CacheSalt(), err, c.want)
		}
		if w := k.Wire(); w.GetEncoded() != "" && w.GetEncoded() != c.want {
			t.Errorf("%v: wire key %v", c.args, w)
		}
	}
}

func TestKeyFlagsRefuse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// A pre-group key with a salt of hex digits would read back as GROUP@HASH.
		{[]string{"--model", "m", "--hash", "00ff", "--salt", "ab"}, "--group 0"},
		{[]string{"--model", "m", "--hash", "00ff", "--rank", "0x8000000000000000"}, "--rank/--group"},
		{[]string{"--key", "m@0x00000000@1@00ff", "--group", "1"}, "not both"},
		{[]string{"--native-key", "m@0x00000001@0@00ff"}, "--native-key"},
		{[]string{"--native-key", "m@00000001@0@00ff", "--key", "m@0x00000000@00"}, "not both"},
	} {
		k := keyFlags(t, c.args...)
		err := k.Precheck()
		if err == nil {
			_, err = k.Build(engine.NamespaceObject)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
