package node

import (
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

var errKey = errors.New("bad key")

// keyOf builds the engine key of a wire key, refusing anything the engine could not store
// or that would name a different key than the sender meant.
func keyOf(k *p2ppb.ObjectKey, ns engine.Namespace) (engine.Key, error) {
	if k == nil {
		return engine.Key{}, fmt.Errorf("%w: empty key", errKey)
	}
	if k.Encoded != "" {
		if k.ModelName != "" || k.ChunkHash != nil || k.CacheSalt != "" || k.KvRank != 0 || k.ObjectGroupId != 0 {
			return engine.Key{}, fmt.Errorf("%w: an encoded key carries no other field", errKey)
		}
		if err := engine.CheckKey(k.Encoded, ns); err != nil {
			return engine.Key{}, fmt.Errorf("%w: %v", errKey, err)
		}
		key, err := engine.ParseKey(k.Encoded, ns)
		if err != nil {
			return engine.Key{}, fmt.Errorf("%w: %v", errKey, err)
		}
		return key, nil
	}
	switch {
	case ns != engine.NamespaceObject:
		return engine.Key{}, fmt.Errorf("%w: the cache uses the %s namespace; send the encoded key", errKey, ns)
	case k.ModelName == "" || len(k.ChunkHash) == 0:
		return engine.Key{}, fmt.Errorf("%w: model_name and chunk_hash are required", errKey)
	case k.KvRank < 0:
		return engine.Key{}, fmt.Errorf("%w: kv_rank %d is negative", errKey, k.KvRank)
	case k.ObjectGroupId < 0:
		return engine.Key{}, fmt.Errorf("%w: object_group_id %d is negative", errKey, k.ObjectGroupId)
	}
	if err := engine.CheckSalt(k.CacheSalt); err != nil {
		return engine.Key{}, fmt.Errorf("%w: %v", errKey, err)
	}
	// Group 0 keeps the shape without the group field (what every older client meant);
	// a group names LMCache's newer shape, and ranks take LMCache's full int64 packing.
	shape := engine.ShapeRawBlock
	if k.ObjectGroupId != 0 {
		shape = engine.ShapeRawBlockGroup
	}
	key, err := engine.ObjectKeyOf(engine.ObjectParts{Shape: shape, Model: k.ModelName, KVRank: uint64(k.KvRank),
		Group: uint64(k.ObjectGroupId), ChunkHash: k.ChunkHash, CacheSalt: k.CacheSalt})
	if err != nil {
		return engine.Key{}, fmt.Errorf("%w: %v", errKey, err)
	}
	return key, nil
}

// keysOf converts a batch, bounded by max.
func keysOf(ks []*p2ppb.ObjectKey, ns engine.Namespace, max int) ([]engine.Key, error) {
	if len(ks) == 0 {
		return nil, fmt.Errorf("%w: no keys", errKey)
	}
	if len(ks) > max {
		return nil, fmt.Errorf("%w: %d keys in one call, at most %d", errKey, len(ks), max)
	}
	out := make([]engine.Key, len(ks))
	for i, k := range ks {
		var err error
		if out[i], err = keyOf(k, ns); err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
	}
	return out, nil
}

// wireKeys is how a node names its keys to a peer: encoded, as the caches store them.
func wireKeys(ks []engine.Key) []*p2ppb.ObjectKey {
	out := make([]*p2ppb.ObjectKey, len(ks))
	for i, k := range ks {
		out[i] = &p2ppb.ObjectKey{Encoded: k.String()}
	}
	return out
}
