# `make scaling`: the throughput curve of one cache sharded over 1, 2 and 4 devices, on this
# host (loop devices, root) and in the VM (null_blk and loop, from the last `make vmtest`
# console log); writes docs/scaling.json and docs/scaling.png (docs/scaling.md). Not part of
# `make test`: the VM half runs inside `make vmtest` (scripts/vmtest/guest.d/80-scaling.sh).
.PHONY: scaling

scaling:
	bash scripts/scaling.sh
