# make man: man pages of every command, generated from the command tree (cobra/doc) into
# out/man (MAN_DIR overrides). Read one with: man -l out/man/rbctl-bench.1
MAN_DIR ?= out/man
.PHONY: man
man:
	go run ./cmd/rbctl/internal/mangen $(MAN_DIR)
