package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/rbctl/rbctl/placement"
)

// maxStoredHandle is the largest handle a slot record and the compact checkpoint can hold
// (a signed 16-bit field, None = -1).
const maxStoredHandle = math.MaxInt16 - 1

// writeFor is the one description of a data write the placement policy sees: the key's
// namespace, model, kv rank and cache salt, its identity, and the payload size.
func writeFor(k Key, size int) placement.Write {
	model, rank := k.modelRank()
	return placement.Write{
		Namespace:  string(k.ns),
		Model:      model,
		KVRank:     rank,
		CacheSalt:  k.CacheSalt(),
		Key:        k.enc,
		Identity:   k.id,
		ChunkIndex: -1, // keys do not carry their position in the token sequence
		Size:       size,
	}
}

// modelRank returns an object key's model and kv rank without allocating (the model is
// unquoted only when it holds an escape); "", 0 for keys of no object shape.
func (k Key) modelRank() (string, uint64) {
	if k.ns != NamespaceObject {
		return "", 0
	}
	f, ok := splitKey(k.enc)
	if !ok {
		return "", 0
	}
	model := f.model
	if f.shape != ShapeNative && strings.IndexByte(model, '%') >= 0 {
		var err error
		if model, err = pyUnquote(model); err != nil {
			return "", 0
		}
	}
	return model, f.rankVal
}

// checkHandle refuses a handle the device or the slot record cannot hold: below None,
// beyond the 16-bit field, or at or beyond the device's handles when it has any (a device
// without placement support ignores handles, so any storable one is accepted). from says
// where the handle came from.
func (e *Engine) checkHandle(h placement.Handle, what, from string) error {
	if h == placement.None {
		return nil
	}
	n := e.handles
	if h < 0 || h > maxStoredHandle || (n > 0 && int(h) >= n) {
		return fmt.Errorf("%w: %s on handle %d from %s; the device has %d handles", ErrBadHandle, what, h, from, n)
	}
	return nil
}

// placeData asks the policy for the handle of a data write (None without a policy).
func (e *Engine) placeData(k Key, size int) (placement.Handle, error) {
	if e.cfg.Placer == nil {
		return placement.None, nil
	}
	h := e.cfg.Placer.Place(writeFor(k, size))
	return h, e.checkHandle(h, "data write", "policy "+e.cfg.Placer.Name())
}

// placeMetadata is the handle of a checkpoint write: Config.MetadataHandle, else what the
// policy gives a metadata write of size bytes.
func (e *Engine) placeMetadata(size int) (placement.Handle, error) {
	if h := e.cfg.MetadataHandle; h != placement.None || e.cfg.Placer == nil {
		return h, e.checkHandle(h, "checkpoint write", "Config.MetadataHandle")
	}
	h := e.cfg.Placer.Place(placement.Write{Namespace: string(e.cfg.Namespace), ChunkIndex: -1, Metadata: true, Size: size})
	return h, e.checkHandle(h, "checkpoint write", "policy "+e.cfg.Placer.Name())
}

// observe tells a learning policy (placement.Observer) about the keys whose hits[i] is set
// (every key when hits is nil).
func (e *Engine) observe(keys []Key, hits []bool, ev placement.Event) {
	if e.obs == nil {
		return
	}
	for i, k := range keys {
		if hits == nil || hits[i] {
			e.obs.Observe(k.id, ev)
		}
	}
}

// badHandle marks, in putMany, a key whose policy handle checkHandle refused: the key is not
// written (a failed put). It is below None, so no policy answer is mistaken for it.
const badHandle placement.Handle = math.MinInt32
