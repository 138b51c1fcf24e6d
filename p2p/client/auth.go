package client

import (
	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/p2p/auth"
)

// WithToken makes every call present token to a node that checks tokens (rbctl serve
// --auth-file). Without TLS the token travels in clear (docs/p2p.md, threat model).
func WithToken(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(auth.Credentials{Secret: token})
}
