// Package vmtest holds the Go side of `make vmtest` (docs/vmtest.md): host-side checks of the
// harness scripts in scripts/vmtest, and, in sub-package probe, the harness's own minimal
// NVMe Identify client and real-device tests. The harness itself is scripts/vmtest/run.sh.
package vmtest
