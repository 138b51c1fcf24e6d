# make demo: the README's main command. Builds rbctl, benchmarks placement policies on a
# file-backed emulated FDP SSD, prints the comparison and writes plots to out/demo/
# (scripts/demo.sh; DEMO_OUT and DEMO_DURATION override the defaults).
.PHONY: demo
demo:
	bash scripts/demo.sh
