# bench-resp: rbctl serve --resp vs valkey-server on the same machine (scripts/resp-bench.sh).
# Not part of `make test`: it measures, it does not assert. See docs/resp.md.
.PHONY: bench-resp
bench-resp:
	bash scripts/resp-bench.sh
