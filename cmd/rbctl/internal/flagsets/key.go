package flagsets

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// Key builds a key from --key, --native-key or --model-name/--rank/--group/--hash/--salt.
type Key struct {
	Key, Native, Model, Hash, Salt string
	Rank                           uint64
	Group                          uint64
	// HasGroup: --group was given (group 0 included): the key is built in the object-group
	// shape, quote(model)@0xRANK@GROUP@HASH[@salt], as LMCache's current raw-block codec
	// writes it; without it, in the shape before object groups (LMCache key_codec @3f45a9ad).
	HasGroup bool

	group *pflag.Flag
}

// Add defines the key flags on cmd.
func (k *Key) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.Key, "key", "", "encoded key as stored, byte for byte (e.g. my%2Fmodel@0x00000000@<hex>@salt, or m@0x00000000@1@<hex>)")
	cmd.Flags().StringVar(&k.Native, "native-key", "", "key in LMCache's native-connector spelling, model@RANK(%08x)@GROUP(%x)@HASH[@salt]: names the raw-block key of the same ObjectKey")
	flagcheck.Alias(cmd.Flags(), "model", "model-name") // its name until issue 25; --model is bench's preset
	cmd.Flags().StringVar(&k.Model, "model-name", "", "model name (object key)")
	cmd.Flags().Uint64Var(&k.Rank, "rank", 0, "kv rank (object key; LMCache packs ws<<24|gr<<16|lws<<8|lr, up to 2^63-1)")
	cmd.Flags().Uint64Var(&k.Group, "group", 0, "object_group_id: build the key in the object-group shape model@0xRANK@GROUP@HASH[@salt] (group 0 too)")
	cmd.Flags().StringVar(&k.Hash, "hash", "", "chunk hash in hex (object key)")
	cmd.Flags().StringVar(&k.Salt, "salt", "", "cache_salt (object key, optional)")
	k.group = cmd.Flags().Lookup("group")
}

const errBoth = "give one of --key, --native-key or --model-name/--rank/--group/--hash/--salt, not both"

func (k *Key) structured() bool {
	if k.group != nil && k.group.Changed {
		k.HasGroup = true
	}
	return k.Model != "" || k.Hash != "" || k.Salt != "" || k.HasGroup
}

// Precheck runs the checks that do not need the cache's namespace, before any device is
// opened: a key that can never be valid is refused without touching anything.
func (k *Key) Precheck() error {
	if k.Native != "" {
		if k.Key != "" || k.structured() {
			return errors.New(errBoth)
		}
		_, err := k.Build(engine.NamespaceObject)
		return err
	}
	if k.Key == "" {
		_, err := k.Build(engine.NamespaceObject)
		return err
	}
	// Namespace-independent: the object grammar is checked once the namespace is known.
	if err := engine.CheckKey(k.Key, engine.NamespaceLegacy); err != nil && !errors.Is(err, engine.ErrKeyFormat) {
		return err
	}
	for _, c := range k.Key {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("--key %s: has a control character", QuoteKey(k.Key))
		}
	}
	if len(k.Key) > engine.MaxKeyBytes {
		return fmt.Errorf("--key: %d bytes, longer than %d", len(k.Key), engine.MaxKeyBytes)
	}
	if k.structured() {
		return errors.New(errBoth)
	}
	return nil
}

// Build is the key the flags name in namespace ns.
func (k *Key) Build(ns engine.Namespace) (engine.Key, error) {
	structured := k.structured()
	switch {
	case (k.Key != "" || k.Native != "") && structured, k.Key != "" && k.Native != "":
		return engine.Key{}, errors.New(errBoth)
	case k.Native != "":
		if ns != engine.NamespaceObject {
			return engine.Key{}, errors.New("--native-key names an object-namespace key; this cache uses the legacy namespace, pass --key")
		}
		key, err := engine.FromNative(k.Native)
		if err != nil {
			return engine.Key{}, fmt.Errorf("--native-key: %s", reports.Escape(err.Error()))
		}
		return key, nil
	case k.Key != "":
		if err := engine.CheckKey(k.Key, ns); err != nil {
			return engine.Key{}, fmt.Errorf("--key: %s", reports.Escape(err.Error()))
		}
		return engine.ParseKey(k.Key, ns)
	case !structured:
		return engine.Key{}, errors.New("no key given: pass --key, --native-key, or --model-name and --hash (with --rank, --group, --salt)")
	case ns != engine.NamespaceObject:
		return engine.Key{}, errors.New("--model-name/--hash build object-namespace keys; this cache uses the legacy namespace, pass --key")
	case k.Model == "" || k.Hash == "":
		return engine.Key{}, errors.New("--model-name and --hash are both required (or pass --key)")
	}
	h, err := hex.DecodeString(strings.TrimPrefix(k.Hash, "0x"))
	if err != nil || len(h) == 0 {
		return engine.Key{}, fmt.Errorf("--hash %s: not an even number of hex digits", QuoteKey(k.Hash))
	}
	if err := engine.CheckSalt(k.Salt); err != nil {
		return engine.Key{}, fmt.Errorf("--salt: %s", reports.Escape(err.Error()))
	}
	if k.Rank > engine.MaxKVRank || k.Group > engine.MaxKVRank {
		return engine.Key{}, fmt.Errorf("--rank/--group: at most %d (LMCache carries them as int64)", int64(engine.MaxKVRank))
	}
	p := engine.ObjectParts{Shape: engine.ShapeRawBlock, Model: k.Model, KVRank: k.Rank, ChunkHash: h, CacheSalt: k.Salt}
	if k.HasGroup {
		p.Shape, p.Group = engine.ShapeRawBlockGroup, k.Group
	}
	key, err := engine.ObjectKeyOf(p)
	if err != nil {
		msg := err.Error()
		if !k.HasGroup {
			msg += " (pass --group 0)"
		}
		return engine.Key{}, fmt.Errorf("--model-name/--hash/--salt: %s", reports.Escape(msg))
	}
	return key, nil
}

// maxQuotedKey is how much of a key a message repeats.
const maxQuotedKey = 64

// QuoteKey renders a key (or other untrusted text) for an error message: escaped
// (reports.Escape), and one longer than 64 bytes cut to its first 64 with its length, so that
// a 64 KiB key does not fill the terminal: "m@0x00000000@abab... (6013 bytes)".
func QuoteKey(s string) string {
	if len(s) <= maxQuotedKey {
		return reports.Escape(s)
	}
	n := maxQuotedKey
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", reports.Escape(s[:n]), len(s))
}

// MissingKey is get's error for a key the opened cache does not index: when the checkpoint
// listed it but recovery dropped it (its slot header did not verify), it says so and why,
// rather than that it was never there.
func MissingKey(key string, dropped []engine.DroppedEntry) error {
	for _, d := range dropped {
		if d.Key == key {
			return fmt.Errorf("%s is not served: the checkpoint lists it in slot %d, but %s (rbctl inspect --verify lists what recovery drops; rbctl recover writes the index without it)",
				QuoteKey(key), d.Slot, d.Reason)
		}
	}
	return fmt.Errorf("%s is not in the cache (rbctl ls lists the keys)", QuoteKey(key))
}
