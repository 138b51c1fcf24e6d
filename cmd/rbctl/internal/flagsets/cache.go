package flagsets

// How commands that open an existing cache fill cache.OpenOptions: --key-namespace speaks when
// nothing on the device can; recover takes the checkpoint choice upon itself and may scan.
// The rules themselves (cache.Open) are the library's; this adds what to type.

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// OpenChoices is the choices of a command that opens an existing cache: --key-namespace, and for
// recover the command's context and whether it takes a doubtful or lossy checkpoint choice
// upon itself (it reports the choice and decides whether to write).
type OpenChoices struct {
	Namespace string
	Ctx       context.Context
	Accept    bool
	Scan      Scan // recover: rebuild from the slot headers when no checkpoint is usable (scan.go)
}

// AddNamespace defines --key-namespace on cmd.
func (o *OpenChoices) AddNamespace(cmd *cobra.Command) {
	flagcheck.Alias(cmd.Flags(), "namespace", "key-namespace") // its name until issue 25
	cmd.Flags().StringVar(&o.Namespace, "key-namespace", "", "key namespace (object or legacy) for a cache whose checkpoint cannot tell, such as an empty LMCache v1 one; it must agree with what the checkpoint or slot headers show")
}

// options are the cache.OpenOptions the flags choose (all but the device and placement).
func (o *OpenChoices) options(readOnly bool) (cache.OpenOptions, error) {
	co := cache.OpenOptions{ReadOnly: readOnly, Accept: o.Accept, Context: o.Ctx, Scan: o.Scan.mode()}
	if given := strings.TrimSpace(o.Namespace); given != "" {
		co.Namespace = engine.Namespace(given)
		if co.Namespace != engine.NamespaceObject && co.Namespace != engine.NamespaceLegacy {
			return co, fmt.Errorf("--key-namespace %s: %w", reports.Escape(given), cache.ErrBadNamespace)
		}
	}
	var err error
	if co.ScanHint, err = o.Scan.hint(); err != nil {
		return co, err
	}
	return co, nil
}
