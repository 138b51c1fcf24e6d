package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node that is not there is reported in plain words, and the gRPC status stays
// reachable for callers that test it.
func TestNodeErrorPlainWords(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Stats(context.Background())
	var ne *NodeError
	if !errors.As(err, &ne) || status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Fatalf("err %v (%T)", err, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "cannot reach the node at "+addr+": connection refused") || strings.Contains(msg, "rpc error") || strings.Contains(msg, "desc =") {
		t.Fatalf("message %q", msg)
	}
	// A server that takes the connection and never speaks (gRPC gives up after 20 s).
	preface := status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: raw-read tcp 127.0.0.1:52170->127.0.0.1:18011: use of closed network connection"`)
	if got := (&NodeError{Addr: "a:1", Err: preface}).Error(); !strings.Contains(got, "took the connection but sent no gRPC handshake") || strings.Contains(got, "raw-read") {
		t.Errorf("silent server: %q", got)
	}
	for code, want := range map[codes.Code]string{
		codes.DeadlineExceeded: "did not answer in time", codes.PermissionDenied: "refused: no", codes.NotFound: "node a:1: no",
	} {
		if got := (&NodeError{Addr: "a:1", Err: status.Error(code, "no")}).Error(); !strings.Contains(got, want) {
			t.Errorf("%v: %q, want %q", code, got, want)
		}
	}
}

// A control-plane client pointed at a port where something else answers (a RESP server's
// -ERR, an HTTP/1 server) is told it is not a node's control plane, and which address to give.
func TestNodeErrorWrongPort(t *testing.T) {
	for name, answer := range map[string]string{
		"resp":  "-ERR unknown command 'PRI', with args beginning with: '*' 'HTTP/2.0' \r\n",
		"http1": "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(answer))
				time.Sleep(100 * time.Millisecond)
				c.Close()
			}
		}()
		c, err := Dial(ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Stats(context.Background())
		c.Close()
		ln.Close()
		if err == nil || !strings.Contains(err.Error(), "is not a node's control plane") || !strings.Contains(err.Error(), "serve's --listen") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
