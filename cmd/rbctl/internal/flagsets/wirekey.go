package flagsets

import (
	"encoding/hex"
	"math"
	"strings"

	"github.com/rbctl/rbctl/engine"

	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// Wire is the key the flags name as a cache node's API carries it (after Precheck).
func (k *Key) Wire() *p2ppb.ObjectKey {
	if k.Key != "" {
		return client.EncodedKey(k.Key)
	}
	if k.Native != "" || k.HasGroup || k.Rank > math.MaxUint32 {
		// Shapes the node's field form does not build (object groups, ranks past 32 bits,
		// the native spelling's raw-block key): send the key encoded, as it is stored.
		key, _ := k.Build(engine.NamespaceObject) // Precheck validated it
		return client.EncodedKey(key.String())
	}
	h, _ := hex.DecodeString(strings.TrimPrefix(k.Hash, "0x")) // Precheck validated it
	return client.Key(k.Model, uint32(k.Rank), h, k.Salt)
}

// Stored is the key's spelling as the node stores it (after Precheck): --key as given, else
// the object-namespace key the other flags build, as a local put would name it.
func (k *Key) Stored() string {
	if k.Key != "" {
		return k.Key
	}
	key, _ := k.Build(engine.NamespaceObject) // Precheck validated it
	return key.String()
}
