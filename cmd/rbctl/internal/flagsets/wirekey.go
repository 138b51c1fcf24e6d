package flagsets

import (
	"encoding/hex"
	"strings"

	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// Wire is the key the flags name as a cache node's API carries it (after Precheck).
func (k *Key) Wire() *p2ppb.ObjectKey {
	if k.Key != "" {
		return client.EncodedKey(k.Key)
	}
	h, _ := hex.DecodeString(strings.TrimPrefix(k.Hash, "0x")) // Precheck validated it
	return client.Key(k.Model, k.Rank, h, k.Salt)
}
