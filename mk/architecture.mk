# docs/architecture.md: the import graph from `go list` (tools/archdoc) and the
# write path of one bench put, traced from a real run (its TestWritePath). The test
# TestGraphCurrent fails in `make unit` when the committed graph is stale.
.PHONY: architecture

architecture:
	$(GO) run ./tools/archdoc -root .
	RBCTL_ARCHDOC_TRACE=1 $(GO) test -count=1 -run '^TestWritePath$$' ./tools/archdoc/
