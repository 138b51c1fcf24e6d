# `make vmtest`: real-kernel tests (NVMe driver on QEMU's emulated controller, null_blk) in a
# QEMU guest; see docs/vmtest.md. Skips with a message where QEMU or the kernel image is
# missing and we are not root; as root (CI) `make setup` installs them and it must run.
# KVM only when a short probe boot shows it runs a guest, else TCG; every boot phase has its
# own watchdog. Knobs (VMTEST_ACCEL, VMTEST_QEMU, VMTEST_PKGS, ...) pass through the environment.
.PHONY: vmtest
TEST_TARGETS += vmtest

vmtest:
	bash scripts/vmtest/run.sh
