package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/rbctl/rbctl/p2p"
)

// JoinFunc returns a function (p2p/node.Start uses it) that joins the cluster cfg describes with
// the node's bound addresses as its advertised control and data planes. Without cfg.Name the
// member is named HOST-PORT (the host name and the control port). The returned Closer leaves
// the cluster gracefully (within leaveTimeout), which also shuts the member down.
func JoinFunc(cfg Config, leaveTimeout time.Duration) func(context.Context, p2p.Peer) (p2p.Directory, io.Closer, error) {
	return func(ctx context.Context, self p2p.Peer) (p2p.Directory, io.Closer, error) {
		c := cfg
		c.Control, c.Data = self.Control, self.Data
		if c.Name == "" {
			c.Name = DefaultName(self.Control)
		}
		m, err := Join(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		return m, leaver{m, leaveTimeout}, nil
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// DefaultName is a member name for a node whose control plane is at control: the host name
// and the port, with characters a name cannot hold replaced by '-'.
func DefaultName(control string) string {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(control)
	name := unsafeName.ReplaceAllString(host+"-"+port, "-")
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	return name
}

type leaver struct {
	c       *Cluster
	timeout time.Duration
}

func (l leaver) Close() error { return l.c.Leave(l.timeout) }

// SplitBind splits a gossip address HOST:PORT into Config.BindAddr and BindPort (port 0: any).
func SplitBind(hp string) (string, int, error) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("gossip address %q: %v", hp, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("gossip address %q: port %q is not 0-65535", hp, p)
	}
	return h, port, nil
}
