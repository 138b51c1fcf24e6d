package client

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeError is a call to a node that failed, phrased for a person: "cannot reach the node
// at 127.0.0.1:7470: connection refused (nothing listens there)" rather than gRPC's
// "rpc error: code = Unavailable desc = connection error: desc = ...". Err is the gRPC
// status error (status.Code, errors.Unwrap) or the client's own.
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Unwrap() error { return e.Err }

func (e *NodeError) Error() string {
	st, ok := status.FromError(e.Err)
	if !ok {
		return "node " + e.Addr + ": " + e.Err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		return "cannot reach the node at " + e.Addr + ": " + transportCause(msg)
	case codes.DeadlineExceeded:
		return "the node at " + e.Addr + " did not answer in time (" + msg + ")"
	case codes.Unauthenticated:
		return "the node at " + e.Addr + " wants a token it accepts: " + msg
	case codes.PermissionDenied:
		return "the node at " + e.Addr + " refused: " + msg
	case codes.Canceled:
		return "call to the node at " + e.Addr + " canceled"
	}
	return "node " + e.Addr + ": " + msg
}

// transportCause is the last cause in gRPC's nested transport message, in plain words.
func transportCause(msg string) string {
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "connection refused"):
		return "connection refused (nothing listens there: is rbctl serve running, on that port?)"
	case strings.Contains(low, "no such host"):
		return "unknown host name"
	case strings.Contains(low, "i/o timeout"), strings.Contains(low, "deadline"):
		return "no answer (a firewall, or a wrong address?)"
	case strings.Contains(low, "no route to host"), strings.Contains(low, "network is unreachable"):
		return "no route to that host"
	case strings.Contains(low, "tls"), strings.Contains(low, "certificate"), strings.Contains(low, "handshake"):
		return "TLS handshake failed (certificates, or TLS on one side only): " + lastDesc(msg)
	case strings.Contains(low, "frame too large"), strings.Contains(low, "looked like an http/1.1"):
		// Bytes that are no HTTP/2 frame: a RESP server's -ERR, an HTTP/1 server's status line.
		return "what answers there is not a node's control plane (gRPC): is it the RESP or the metrics port? --server takes the address of serve's --listen (" + lastDesc(msg) + ")"
	case strings.Contains(low, "server preface") && strings.Contains(low, "use of closed network connection"):
		// It took the connection and never spoke HTTP/2: gRPC closed it after 20 s (an EOF
		// or a reset instead is the other side closing: a TLS node, which the CLI explains).
		return "it took the connection but sent no gRPC handshake: is it a node's control plane (serve's --listen address), and is the node overloaded or stopped?"
	}
	return lastDesc(msg)
}

// lastDesc strips gRPC's "connection error: desc = \"transport: Error while dialing: ...\""
// down to its innermost text.
func lastDesc(msg string) string {
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	msg = strings.Trim(msg, `"`)
	for _, p := range []string{"transport: Error while dialing: ", "transport: authentication handshake failed: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// wrap states which node a failed call went to, in plain words (NodeError).
func (c *Client) wrap(err error) error { return &NodeError{Addr: c.addr, Err: err} }
