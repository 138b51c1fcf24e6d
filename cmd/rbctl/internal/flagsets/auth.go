package flagsets

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
)

// Access is the flags of `rbctl serve` that say who gets in (docs/p2p.md, "Access
// control"): the token file clients and peers present tokens of, the token this node
// presents to its peers, the gossip encryption keys, and the lease caps.
type Access struct {
	AuthFile, PeerTokenFile, GossipKeyFile string
	MaxLeases, MaxLeasesPerClient          int
}

// Add defines --auth-file, --peer-token-file, --gossip-key-file, --max-leases and
// --max-leases-per-client.
func (f *Access) Add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.AuthFile, "auth-file", "", "token file: every gRPC call and RESP connection must present one of its tokens and stays within its rights and cache_salt scopes (docs/p2p.md); empty: no tokens checked (trusted network only)")
	fs.StringVar(&f.PeerTokenFile, "peer-token-file", "", "file holding the token this node presents to its peers (a token with the peer right in their --auth-file); empty: $RBCTL_PEER_TOKEN, else none")
	fs.StringVar(&f.GossipKeyFile, "gossip-key-file", "", "gossip encryption keys, one base64 key (16, 24 or 32 bytes) a line, the first used to send, all accepted (rotation); make one with: head -c32 /dev/urandom | base64")
	fs.IntVar(&f.MaxLeases, "max-leases", 16384, "leases this node grants at once, all clients together; more are misses for the requester (counted as leases_refused)")
	fs.IntVar(&f.MaxLeasesPerClient, "max-leases-per-client", 1024, "leases one client holds at once (a client: its token's name, else its address)")
}

// Apply reads the files into opts and cl; warnings (a file others can read, peers without
// a token) go to log.
func (f *Access) Apply(opts *node.Options, cl *cluster.Config, staticPeers bool, log *slog.Logger) error {
	if f.MaxLeasesPerClient > f.MaxLeases {
		return fmt.Errorf("--max-leases-per-client %d is above --max-leases %d", f.MaxLeasesPerClient, f.MaxLeases)
	}
	opts.Limits.MaxLeases, opts.Limits.MaxLeasesPerClient = f.MaxLeases, f.MaxLeasesPerClient
	if f.AuthFile != "" {
		ts, warn, err := auth.Load(f.AuthFile)
		if err != nil {
			return fmt.Errorf("--auth-file: %v", err) // %v: a missing file is bad input (exit 1), not a missing key
		}
		if warn != "" {
			log.Warn(warn)
		}
		opts.Tokens = ts
		log.Info("access control: tokens checked on the control plane and RESP", "tokens", ts.Len())
	}
	secret, from := os.Getenv("RBCTL_PEER_TOKEN"), "$RBCTL_PEER_TOKEN"
	if f.PeerTokenFile != "" {
		s, warn, err := auth.ReadSecret(f.PeerTokenFile)
		if err != nil {
			return fmt.Errorf("--peer-token-file: %v", err)
		}
		if warn != "" {
			log.Warn(warn)
		}
		secret, from = s, f.PeerTokenFile
	}
	opts.PeerToken = secret
	if secret == "" && opts.Tokens != nil && (staticPeers || cl.Cluster != "none") {
		log.Warn("no --peer-token-file: peers that check tokens will refuse this node's lookups (misses)")
	} else if secret != "" {
		log.Info("peer token", "from", from)
	}
	if f.GossipKeyFile != "" {
		if staticPeers || cl.Cluster == "none" {
			return fmt.Errorf("--gossip-key-file encrypts cluster gossip; with --peers or --cluster none there is none")
		}
		r, err := os.Open(f.GossipKeyFile)
		if err != nil {
			return fmt.Errorf("--gossip-key-file: %v", err)
		}
		defer r.Close()
		if st, err := r.Stat(); err == nil && st.Mode().Perm()&0o044 != 0 {
			log.Warn("gossip key file readable by others than its owner (chmod 600)", "file", f.GossipKeyFile, "mode", fmt.Sprintf("%04o", st.Mode().Perm()))
		}
		keys, err := cluster.ParseKeys(io.LimitReader(r, 1<<20))
		if err != nil {
			return fmt.Errorf("--gossip-key-file %s: %v", f.GossipKeyFile, err)
		}
		cl.GossipKeys = keys
	}
	return nil
}

// Token is the client side: --token-file, else $RBCTL_TOKEN (a token is never a flag value,
// which any user could read in ps).
type Token struct{ File string }

// Add defines --token-file.
func (f *Token) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.File, "token-file", "", "file whose first line is the token to present to a node started with --auth-file; empty: $RBCTL_TOKEN, else none")
}

// DialOptions returns the client options that present the token, if any; warnings go to w.
func (f *Token) DialOptions(w io.Writer) ([]grpc.DialOption, error) {
	secret := os.Getenv("RBCTL_TOKEN")
	if f.File != "" {
		s, warn, err := auth.ReadSecret(f.File)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %v", err)
		}
		if warn != "" {
			fmt.Fprintln(w, "warning:", warn)
		}
		secret = s
	}
	if secret == "" {
		return nil, nil
	}
	return []grpc.DialOption{client.WithToken(secret)}, nil
}
