# Fuzz every FuzzXxx target: briefly in `make test`, longer in `make fuzz`.
# Found inputs are kept under testdata/fuzz/ as regression cases by `go test` itself.
.PHONY: fuzz fuzz-short
FUZZ_RUN = scripts/fuzz.sh

fuzz-short:
	bash $(FUZZ_RUN) $(FUZZTIME_SHORT)

fuzz:
	bash $(FUZZ_RUN) $(FUZZTIME)
