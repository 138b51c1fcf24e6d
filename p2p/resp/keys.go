package resp

import (
	"fmt"
	"time"

	"github.com/rbctl/rbctl/engine"
)

// GenericModel is the model name under which a key that is not in LMCache's native spelling
// is stored (the generic namespace, docs/resp.md): its bytes, hex-encoded, are the chunk hash
// of the object key `rbctl.resp.generic@0x00000000@HEX` — reversible for any bytes (binary
// keys too), a key of its own that no LMCache chunk shares, and unplaced (no cache_salt).
const GenericModel = "rbctl.resp.generic"

// MaxGenericKey bounds a generic key (its hex doubles it; the slot header's key record must
// hold the encoded key for recover --scan).
const MaxGenericKey = 1024

// parseKey is the Key of raw for a raw-block store (EngineStore, NodeStore): storeKey's
// engine key and its cache_salt, or the refusal.
func parseKey(raw []byte) Key {
	k, err := storeKey(raw)
	if err != nil {
		return Key{Raw: raw, Err: err}
	}
	return Key{Raw: raw, Engine: k, Salt: k.CacheSalt()}
}

// storeKey maps a RESP key to the engine key it is stored under: a key in LMCache's native
// spelling to the raw-block key of the same ObjectKey (one entry whichever codec wrote it),
// any other key of 1..MaxGenericKey bytes into the generic namespace.
func storeKey(k []byte) (engine.Key, error) {
	if key, err := engine.FromNative(string(k)); err == nil {
		return key, nil
	}
	if key, ok := objectKey(k); ok {
		return key, nil
	}
	if len(k) == 0 || len(k) > MaxGenericKey {
		return engine.Key{}, fmt.Errorf("%w: a key that is not LMCache's native spelling must have 1..%d bytes, not %d", ErrKey, MaxGenericKey, len(k))
	}
	key := engine.ObjectKey(GenericModel, 0, k, "")
	if err := engine.CheckKey(key.String(), engine.NamespaceObject); err != nil {
		return engine.Key{}, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return key, nil
}

// objectKey reads k as an object key in one of the raw-block codec's spellings (what `rbctl
// ls` lists and gRPC clients write, e.g. my%2Fmodel@0x00000001@deadbeef@tenant): such a key
// names that entry, so SCAN can list every object key the node holds under a name GET takes.
func objectKey(k []byte) (engine.Key, bool) {
	if engine.CheckKey(string(k), engine.NamespaceObject) != nil {
		return engine.Key{}, false
	}
	key := engine.RawKey(string(k))
	if sh := key.Shape(); sh != engine.ShapeRawBlock && sh != engine.ShapeRawBlockGroup {
		return engine.Key{}, false
	}
	return key, true
}

// respName is the RESP key an engine key is listed under: its native spelling, the bytes of
// a generic key, or false for keys RESP cannot name (written through the raw-block codec in
// a shape the native spelling does not map back to).
func respName(k engine.Key) (string, bool) {
	p, ok := k.Parts()
	if ok && p.Model == GenericModel && p.Shape == engine.ShapeRawBlock && p.KVRank == 0 && p.CacheSalt == "" {
		// Its bytes name it unless they spell another key (a native one: a client that SET
		// the generic namespace's own spelling of that name); then it is listed under that
		// object-key spelling below, which GET takes, and no name is listed twice.
		if back, err := storeKey(p.ChunkHash); err == nil && back == k {
			return string(p.ChunkHash), true
		}
	}
	if n, ok := k.Native(); ok {
		if back, err := engine.FromNative(n); err == nil && back == k {
			return n, true
		}
	}
	if back, ok := objectKey([]byte(k.String())); ok && back == k {
		return k.String(), true
	}
	return "", false
}

// putOrPresent answers a SET: nil once the key is stored, by this put or by another (a key
// names one immutable chunk, so a concurrent SET of the same key stores what this one would);
// a put refused while full() is dropped at once (DropFull); one refused because another
// write of the key is in flight is retried until one of the two holds, for up to a second,
// so nil is never said of a write that could still fail.
func putOrPresent(put func() (bool, error), present, full func() bool) error {
	for pause, waited := 50*time.Microsecond, time.Duration(0); ; pause = min(2*pause, 20*time.Millisecond) {
		ok, err := put()
		if err != nil {
			return err
		}
		if ok || present() {
			return nil
		}
		if full() {
			return drop(DropFull, "no free slot (the cache is full and evicts nothing it could)")
		}
		if waited >= time.Second {
			return drop(DropFull, "not stored (no slot could be freed, or another write of the key did not finish)")
		}
		time.Sleep(pause)
		waited += pause
	}
}
