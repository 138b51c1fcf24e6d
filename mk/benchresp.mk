# bench-resp: rbctl serve --resp vs valkey-server on the same machine (scripts/resp-bench.sh).
# Not part of `make test`: it measures, it does not assert. See docs/resp.md.
.PHONY: bench-resp
bench-resp:
	bash scripts/resp-bench.sh

# bench-resp-ab: two rbctl serve configurations against each other (scripts/resp-ab.sh),
# e.g. make bench-resp-ab BENCH_B_ARGS="--io-engine aio" or BENCH_A_ENV="GOMAXPROCS=1".
# Measures, does not assert.
.PHONY: bench-resp-ab
bench-resp-ab:
	bash scripts/resp-ab.sh
