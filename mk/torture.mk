# Crash torture (docs/reliability.md): 200 SIGKILLs of a writer process on a file-backed
# cache, each followed by recovery and verification. A 10-kill run is part of `go test`
# (internal/torture). TORTURE_KILLS / TORTURE_SEED override.
.PHONY: torture
TORTURE_KILLS ?= 200
TORTURE_SEED  ?= $(shell date +%s)

torture: build
	$(BIN) torture --kills $(TORTURE_KILLS) --seed $(TORTURE_SEED)
