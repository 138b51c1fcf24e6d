// Package p2ppb is the generated gRPC code of rbctl's P2P control plane, from
// p2p/proto/rbctl/p2p/v1/p2p.proto. Do not edit: `make proto` regenerates it (docs/p2p.md).
package p2ppb
