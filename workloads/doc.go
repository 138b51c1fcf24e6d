// Package workloads generates the operation streams rbctl benchmarks and simulates, and runs
// them through a cache backend.
//
// A Generator emits abstract Ops: a KV-cache Request (the chunk chain of one LLM prompt:
// tenant prefix, conversation history, new tokens), or single-key Put/Get/Delete from the
// synthetic generators and trace replay. Generators are deterministic for a seed. A Spec
// names a workload and its driver knobs as rbctl bench and simulate take them; Build makes
// its Source (identical streams, one per run).
//
// A Driver turns the stream into cache traffic the way an LLM serving stack does: look up
// the longest cached prefix (lookup-and-lock), load it, unlock, store the missing chunks,
// and evict (LRU, FIFO or whole regions, plus per-tenant lifetimes; the residency list) to
// keep the cache at a target utilisation, or with per-tenant slot budgets each tenant within
// its own share (budgets.go). The Driver talks to a Backend: the engine
// (bench.Backend, rbctl bench) or a model of it over an FTL model (sim.Backend, rbctl
// simulate).
//
// Formats and knobs are documented in docs/bench.md.
package workloads
