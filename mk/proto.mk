# Regenerates the checked-in gRPC code of the P2P control plane (p2p/p2ppb) from
# p2p/proto/rbctl/p2p/v1/*.proto. Needs protoc (3.21+), protoc-gen-go and protoc-gen-go-grpc
# on PATH or in $(GOBIN_DIR); `make test` never needs them (the generated code is committed).
GOBIN_DIR ?= $(shell $(GO) env GOPATH)/bin
PROTOC    ?= protoc
PROTO_DIR := p2p/proto

.PHONY: proto
proto:
	PATH="$(GOBIN_DIR):$$PATH" $(PROTOC) -I $(PROTO_DIR) \
		--go_out=. --go_opt=module=github.com/rbctl/rbctl \
		--go-grpc_out=. --go-grpc_opt=module=github.com/rbctl/rbctl \
		$(PROTO_DIR)/rbctl/p2p/v1/*.proto
