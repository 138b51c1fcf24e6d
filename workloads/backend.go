package workloads

// Backend is the cache the Driver runs a workload against: the engine (rbctl bench) or
// SimBackend (rbctl simulate). Keys carry their tenant; a backend maps Key.Tenant to its
// cache_salt with the salts it was built with. Methods may be called concurrently.
type Backend interface {
	// Lookup returns how many leading keys are cached and locks those (LMCache's
	// lookup-and-lock: exists_many/get_metadata_prefix with lock).
	Lookup(keys []Key) (hits int, err error)
	// Load reads the payloads of keys (all locked by Lookup); it returns how many loaded.
	Load(keys []Key, size int) (loaded int, err error)
	// Unlock releases the locks Lookup took.
	Unlock(keys []Key)
	// Store writes size-byte payloads for keys; ok[i] says whether keys[i] is now cached.
	Store(keys []Key, size int, ok []bool) error
	// Delete removes keys (and deallocates their slots when the backend is set up to).
	Delete(keys []Key) error
	// Slots is the cache capacity in chunks of the workload's chunk size.
	Slots() int64
}
