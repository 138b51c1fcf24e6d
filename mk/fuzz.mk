# Explore every FuzzXxx target: `make fuzz` (FUZZTIME each), `make fuzz-short` (3 s each).
# Neither is part of `make test`, which runs the seeds and committed corpus only. A failing
# input is written under <pkg>/testdata/fuzz/<target>/ by `go test`: fix the code, keep the
# input, commit both, and the gate checks it from then on.
.PHONY: fuzz fuzz-short
FUZZ_RUN = scripts/fuzz.sh

fuzz-short:
	bash $(FUZZ_RUN) $(FUZZTIME_SHORT)

fuzz:
	bash $(FUZZ_RUN) $(FUZZTIME)
