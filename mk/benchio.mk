# bench-io: fio vs rbctl's io_uring device path on one pre-allocated file (scripts/bench-io.sh).
# Not part of `make test`: it measures, it does not assert. See docs/io_uring.md.
.PHONY: bench-io
bench-io:
	bash scripts/bench-io.sh
