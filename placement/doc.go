// Package placement decides, for every write the engine issues, which FDP placement handle
// (reclaim unit handle index) it goes to. Policies are deterministic functions of what is
// known about the write (key namespace, model, kv rank, cache salt, chunk position,
// data vs checkpoint metadata) and, for the learning policies, of the stream seen so far.
//
// A decision is a Handle, 0..handles-1, or None for no directive (the device's default
// handle). Handle is the one type of a placement decision from the policy through the
// engine to the device op (blockdev.Op.Handle); the device layer maps an
// index to a placement ID from its RUH status, refusing one outside its table.
//
// Every Policy is safe for concurrent use. The package imports only the standard library and
// units (tenant budget sizes, budget.go).
// See docs/placement.md for each policy and the handle layout conventions.
package placement
