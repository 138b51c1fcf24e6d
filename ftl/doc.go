// Package ftl is a deterministic model of an SSD flash translation layer with NVMe Flexible
// Data Placement: reclaim groups of reclaim units (RUs), one open RU per (reclaim group,
// reclaim unit handle), a logical-to-physical map at a fixed mapping unit, over-provisioning,
// greedy or cost-benefit garbage collection, and initially or persistently isolated handles.
//
// It is fed the exact write and deallocate stream a device sees (the emulated FDP SSD) or an
// engine issued (a shadow model of a real run) and counts host bytes written, media bytes
// written (host + GC relocation) and media bytes erased, which is where the FDP statistics
// log's HBMW, MBMW and MBE come from. Every number it produces is model output, not a
// measurement of a drive. See docs/ftl.md.
//
// The package does no I/O, imports nothing but the standard library, and is deterministic:
// the same configuration and the same call sequence give the same counters. A Model is not
// safe for concurrent use; wrap it with NewLocked (or your own mutex) when several
// goroutines feed it.
package ftl
