// Package placement decides, for every write the engine issues, which FDP placement handle
// (reclaim unit handle index) it goes to. Policies are deterministic functions of what is
// known about the write (key namespace, model, kv rank, cache salt, chunk position,
// data vs checkpoint metadata) and, for the learning policies, of the stream seen so far.
//
// Handle indices run 0..handles-1; None asks for no directive (the device's default
// handle). The device layer maps an index to a placement ID from its RUH status.
//
// Every Policy is safe for concurrent use. The package imports only the standard library.
// See docs/placement.md for each policy and the handle layout conventions.
package placement
