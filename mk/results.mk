# make results: regenerate every table and figure under docs/results from the commands that
# made them (docs/results/manifest.json, run by tools/results), RESULTS_JOBS at a time, then
# check that every output exists and parses and write the seed spread (spread.md).
#   RESULTS_SCALE=full (default) writes docs/results; quick (or a factor in (0, 1]) runs each
#   job's configuration for a tenth of its length into out/results-quick: what CI can run.
#   RESULTS_ONLY=REGEXP runs the jobs whose name matches; RESULTS_COMPARE=DIR compares the
#   WAF figures with an earlier run's (within each job's tolerance).
RESULTS_SCALE   ?= full
RESULTS_JOBS    ?= 2
RESULTS_DATA    ?= ../shared/data
RESULTS_OUT     ?= $(if $(filter full,$(RESULTS_SCALE)),docs/results,out/results-$(RESULTS_SCALE))
RESULTS_ONLY    ?=
RESULTS_COMPARE ?=

.PHONY: results results-quick
results: build
	$(GO) run ./tools/results -scale $(RESULTS_SCALE) -j $(RESULTS_JOBS) -out $(RESULTS_OUT) -rbctl $(BIN) \
	  -data $(RESULTS_DATA) $(if $(RESULTS_ONLY),-only '$(RESULTS_ONLY)') $(if $(RESULTS_COMPARE),-compare $(RESULTS_COMPARE))

# The CI check: every job at quick scale, every output produced and parsed.
results-quick:
	$(MAKE) results RESULTS_SCALE=quick
