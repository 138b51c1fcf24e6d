// Package vmtest holds the Go side of `make vmtest` (docs/vmtest.md): host-side checks of the
// harness scripts in scripts/vmtest (syntax; the boot watchdog and KVM probe of boot.sh
// against fake QEMUs; the fall-back to TCG end to end), and, in sub-package probe, the
// harness's own minimal NVMe Identify client and real-device tests. The harness itself is
// scripts/vmtest/run.sh.
package vmtest
