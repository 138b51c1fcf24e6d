# Reliability suites (docs/reliability.md).
# `make torture`: 200 SIGKILLs of a writer process on a file-backed cache, each followed by
# recovery and verification (a 10-kill run is part of `go test` in cmd/rbctl/internal/torture).
# `make race-model`: the engine's model-based concurrency and crash-window tests, its header
# prefetch and the walks the node's eviction order is seeded from, and the node's eviction
# tests, under -race; part of `make test`. TORTURE_KILLS / TORTURE_SEED override.
.PHONY: torture race-model
TORTURE_KILLS ?= 200
TORTURE_SEED  ?= $(shell date +%s)

torture: build
	$(BIN) torture --kills $(TORTURE_KILLS) --seed $(TORTURE_SEED)

race-model:
	$(GO) test -count=1 -race -run 'TestConcurrentModel|TestCrashWindow|TestPrefetched|TestKeysOf|TestInStoreOrder' ./engine
	$(GO) test -count=1 -race -run 'TestKeyList|TestSeeding|TestLegacyKeys|TestRestartKeepsStoreOrder|TestStartOnAFullCache|TestFullNode|TestLeased|TestRegionEviction|TestWritingAHeldKey' ./p2p/node

TEST_TARGETS += race-model
