package client

import (
	"time"

	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/p2p/secure"
)

// DialTLS is Dial over TLS: the node's certificate must be signed by m's CA and carry the
// host of addr; m's certificate, if it has one, is presented (a node serving TLS refuses a
// client without one).
func DialTLS(addr string, timeout time.Duration, m *secure.Material, opts ...grpc.DialOption) (*Client, error) {
	return dial(addr, timeout, m.ClientCredentials(), opts...)
}
