package flagsets

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// Key builds a key from --key or --model/--rank/--hash/--salt.
type Key struct {
	Key, Model, Hash, Salt string
	Rank                   uint32
}

// Add defines the key flags on cmd.
func (k *Key) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.Key, "key", "", "encoded key as stored (e.g. my%2Fmodel@0x00000000@<hex>@salt)")
	cmd.Flags().StringVar(&k.Model, "model", "", "model name (object key)")
	cmd.Flags().Uint32Var(&k.Rank, "rank", 0, "kv rank (object key)")
	cmd.Flags().StringVar(&k.Hash, "hash", "", "chunk hash in hex (object key)")
	cmd.Flags().StringVar(&k.Salt, "salt", "", "cache_salt (object key, optional)")
}

const errBoth = "give either --key or --model/--rank/--hash/--salt, not both"

// Precheck runs the checks that do not need the cache's namespace, before any device is
// opened: a key that can never be valid is refused without touching anything.
func (k *Key) Precheck() error {
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
			return fmt.Errorf("--key %s: has a control character", strconv.Quote(k.Key))
		}
	}
	if len(k.Key) > engine.MaxKeyBytes {
		return fmt.Errorf("--key: %d bytes, longer than %d", len(k.Key), engine.MaxKeyBytes)
	}
	if k.Model != "" || k.Hash != "" || k.Salt != "" {
		return errors.New(errBoth)
	}
	return nil
}

// Build is the key the flags name in namespace ns.
func (k *Key) Build(ns engine.Namespace) (engine.Key, error) {
	structured := k.Model != "" || k.Hash != "" || k.Salt != ""
	switch {
	case k.Key != "" && structured:
		return engine.Key{}, errors.New(errBoth)
	case k.Key != "":
		if err := engine.CheckKey(k.Key, ns); err != nil {
			return engine.Key{}, fmt.Errorf("--key: %s", cachereport.Escape(err.Error()))
		}
		return engine.ParseKey(k.Key, ns)
	case !structured:
		return engine.Key{}, errors.New("no key given: pass --key, or --model and --hash (with --rank, --salt)")
	case ns != engine.NamespaceObject:
		return engine.Key{}, errors.New("--model/--hash build object-namespace keys; this cache uses the legacy namespace, pass --key")
	case k.Model == "" || k.Hash == "":
		return engine.Key{}, errors.New("--model and --hash are both required (or pass --key)")
	}
	h, err := hex.DecodeString(strings.TrimPrefix(k.Hash, "0x"))
	if err != nil || len(h) == 0 {
		return engine.Key{}, fmt.Errorf("--hash %s: not an even number of hex digits", strconv.Quote(k.Hash))
	}
	if err := engine.CheckSalt(k.Salt); err != nil {
		return engine.Key{}, fmt.Errorf("--salt: %s", cachereport.Escape(err.Error()))
	}
	key := engine.ObjectKey(k.Model, k.Rank, h, k.Salt)
	if err := engine.CheckKey(key.String(), ns); err != nil {
		return engine.Key{}, fmt.Errorf("--model/--hash/--salt: %s", cachereport.Escape(err.Error()))
	}
	return key, nil
}
