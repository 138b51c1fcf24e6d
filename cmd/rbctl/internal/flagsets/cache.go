package flagsets

// How commands that open an existing cache learn its key namespace and checkpoint format,
// and when they refuse to write: the namespace and format come from the checkpoint
// recovery chooses (engine.Detect); --namespace speaks when nothing on the device can.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// Cache is the choices of a command that opens an existing cache: --namespace, and for
// recover the command's context and whether it takes a doubtful or lossy checkpoint choice
// upon itself (it reports the choice and decides whether to write).
type Cache struct {
	Namespace string
	Ctx       context.Context
	Accept    bool
	Scan      Scan // recover: rebuild from the slot headers when no checkpoint is usable (scan.go)
}

// AddNamespace defines --namespace on cmd.
func (o *Cache) AddNamespace(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "key namespace (object or legacy) for a cache whose checkpoint cannot tell, such as an empty LMCache v1 one; it must agree with what the checkpoint or slot headers show")
}

// Detect reads the layout, namespace and format of the checkpoint recovery will choose.
// A writer is refused when nothing tells the namespace and --namespace is not given: a
// guess would put the wrong slot identity into every slot header it writes.
func (o *Cache) Detect(dev blockdev.Device, readOnly bool) (engine.Config, string, error) {
	d, err := engine.Detect(dev)
	if errors.Is(err, engine.ErrNoCheckpoint) && (o.Scan.On || (o.Scan.scanning() && errors.Is(err, engine.ErrCorrupt))) {
		d, err = o.Scan.detect(dev)
	}
	cfg, err := o.checkDetected(d, readOnly, err)
	return cfg, d.LayoutSource, err
}

func (o *Cache) checkDetected(d engine.Detection, readOnly bool, err error) (engine.Config, error) {
	if err != nil {
		return d.Config, err
	}
	cfg, sel := d.Config, d.Selection
	given := strings.TrimSpace(o.Namespace)
	switch {
	case given != "":
		ns := engine.Namespace(given)
		if ns != engine.NamespaceObject && ns != engine.NamespaceLegacy {
			return cfg, fmt.Errorf("--namespace %s: want object or legacy", cachereport.Escape(given))
		}
		if sel.NamespaceSource != "" && sel.Namespace != ns {
			return cfg, fmt.Errorf("--namespace %s: the cache uses the %s namespace (from %s); drop --namespace", ns, sel.Namespace, sel.NamespaceSource)
		}
		cfg.Namespace = ns
	case sel.NamespaceSource == "" && !readOnly:
		return cfg, errors.New("the checkpoint does not record the key namespace and has no keys that tell it (an empty LMCache v1 checkpoint); pass --namespace object (LMCache MP mode) or --namespace legacy (LMCache's non-MP backend)")
	}
	// A writer must not silently replace a newer checkpoint it could not use.
	if !readOnly && !o.Accept && sel.Fallback && !sel.Doubt && (!sel.LostKnown || sel.Lost > 0) {
		return cfg, fmt.Errorf("%s; %s, and writing would replace it: run rbctl recover to accept that (rbctl inspect shows both containers)", cachereport.Escape(sel.Reason), cachereport.LostText(sel))
	}
	return cfg, nil
}

// Open recovers the cache. A command that writes is refused when the checkpoint choice is
// in doubt, unless it takes the choice upon itself (recover): writing replaces the other
// container.
func (o *Cache) Open(dev blockdev.Device, cfg engine.Config, layoutSource string) (*engine.Engine, error) {
	e, err := engine.OpenWith(dev, cfg, engine.OpenOptions{Context: o.Ctx, AcceptDoubt: o.Accept, Scan: o.Scan.scanning(), ScanLayout: layoutSource})
	if errors.Is(err, engine.ErrSelectionDoubt) {
		return nil, fmt.Errorf("%w; rbctl inspect shows both containers, rbctl recover --force continues from the one chosen", err)
	}
	return e, err
}
