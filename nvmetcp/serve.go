package nvmetcp

import (
	"context"
	"fmt"
	"net"
)

// ListenAndServe runs a target for cfg on the TCP address addr until ctx ends or the
// listener fails, then closes it (every connection, every goroutine). started, when not
// nil, is called with the bound address once the target accepts connections; its error
// stops the target before anything is served.
func ListenAndServe(ctx context.Context, addr string, cfg Config, started func(net.Addr) error) error {
	tgt, err := New(cfg)
	if err != nil {
		return err
	}
	defer tgt.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another target using the port?)", addr, err)
	}
	if started != nil {
		if err := started(ln.Addr()); err != nil {
			ln.Close()
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- tgt.Serve(ln) }()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}
