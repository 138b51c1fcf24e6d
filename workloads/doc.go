// Package workloads generates the operation streams rbctl benchmarks and simulates, and runs
// them through a cache backend.
//
// A Generator emits abstract Ops: a KV-cache Request (the chunk chain of one LLM prompt:
// tenant prefix, conversation history, new tokens), or single-key Put/Get/Delete from the
// synthetic generators and trace replay. Generators are deterministic for a seed.
//
// A Driver turns the stream into cache traffic the way an LLM serving stack does: look up
// the longest cached prefix (lookup-and-lock), load it, unlock, store the missing chunks,
// and evict (LRU or FIFO, plus per-tenant lifetimes) to keep the cache at a target
// utilisation. The Driver talks to a Backend: the engine for `rbctl bench`, or SimBackend
// (an index, a slot allocator and an FTL model, no data movement) for `rbctl simulate`.
//
// Formats and knobs are documented in docs/bench.md.
package workloads
