# make demo: the README's main command. Builds rbctl, benchmarks placement policies on a
# file-backed emulated FDP SSD sized so that GC can always make room, simulates a 1 TiB drive,
# prints the comparisons and writes plots to out/demo/ (scripts/demo.sh; DEMO_OUT,
# DEMO_DURATION and DEMO_POLICIES override the defaults). Fails if any run fails.
.PHONY: demo
demo:
	bash scripts/demo.sh
