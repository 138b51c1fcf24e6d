# `make vmtest`: real-kernel tests in QEMU guests, as a matrix of scenarios (docs/vmtest.md):
# QEMU 10's NVMe with and without FDP on the host's kernel, a >= 6.16 kernel with write
# streams, and trixie's fio and nvme-cli against rbctl. Skips with a message where QEMU or
# a kernel image is missing and we are not root; as root (CI) `make setup` installs them
# and it must run. Guest downloads are cached under .cache/vmtest-guest. KVM only when a
# short probe boot shows it runs a guest, else TCG; every boot phase has its own watchdog.
# Knobs (VMTEST_SCENARIOS, VMTEST_ACCEL, VMTEST_QEMU, VMTEST_PKGS, ...) pass through the
# environment.
.PHONY: vmtest
TEST_TARGETS += vmtest

vmtest:
	bash scripts/vmtest/run.sh
