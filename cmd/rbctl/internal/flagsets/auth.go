package flagsets

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/client"
)

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
