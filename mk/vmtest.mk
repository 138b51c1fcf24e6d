# `make vmtest`: real-kernel tests (NVMe driver on QEMU's emulated controller, null_blk) in a
# QEMU guest; see docs/vmtest.md. Skips with a message where QEMU or the kernel image is
# missing and we are not root; as root (CI) `make setup` installs them and it must run.
.PHONY: vmtest
TEST_TARGETS += vmtest

vmtest:
	bash scripts/vmtest/run.sh
