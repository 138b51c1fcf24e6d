# rbctl — build, test, demo. Sub-makefiles in mk/*.mk add targets and extend TEST_TARGETS.
GO        ?= go
BIN       := bin/rbctl
PKGS      := ./...
# Targets run by `make test` after the unit tests; mk/*.mk append to it (vmtest, ...).
TEST_TARGETS :=
# Fuzzing explores in `make fuzz` (FUZZTIME per target; `make fuzz-short` for 3 s each), never
# in `make test`: the unit tests run every fuzz target's seeds and committed corpus
# (testdata/fuzz/), so the gate's verdict depends only on the commit.
FUZZTIME_SHORT ?= 3s
FUZZTIME       ?= 60s

.PHONY: all build test unit lint vet fmt demo bench fuzz setup clean

all: build

# rbctl version / --version print these (cmd/rbctl/internal/cli/version.go).
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
CLIPKG     := github.com/rbctl/rbctl/cmd/rbctl/internal/cli
LDFLAGS    := -X $(CLIPKG).Version=$(VERSION) -X $(CLIPKG).Commit=$(COMMIT) -X $(CLIPKG).BuildDate=$(BUILD_DATE)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rbctl

setup:
	bash scripts/setup.sh

vet:
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

lint: vet fmt

unit:
	$(GO) test -count=1 -timeout 15m $(PKGS)

include $(wildcard mk/*.mk)

# The README's test command: setup (idempotent), lint, unit tests (root-only tests run on
# loop devices when root; every fuzz target's seeds and committed corpus), then the extra
# suites (VM test, ...). No random exploration: `make fuzz` does that.
test: setup build lint unit $(TEST_TARGETS)
	@echo "make test: all suites passed"

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin .cache
