package cache

// Opening an existing cache: what every command that reads or writes one does first (put,
// get, rm, ls, serve, inspect, recover), here so that a Go program gets the same safety
// rules as rbctl: the layout, key namespace and checkpoint format come from the checkpoint
// recovery chooses; a writer is refused when the namespace is unknown or when writing would
// silently replace a newer checkpoint it could not use; the placement policy is built for
// the device's handles and seeded from the handles the entries were written with.

import (
	"context"
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
)

// ScanMode says when Open rebuilds the index from the key records in the slot headers
// (engine.OpenOptions.Scan) instead of failing for want of a usable checkpoint.
type ScanMode int

const (
	// ScanNever: no usable checkpoint is an error (engine.ErrNoCheckpoint).
	ScanNever ScanMode = iota
	// ScanDamaged scans when the checkpoints are damaged (engine.ErrCorrupt), never on a
	// device that was never formatted.
	ScanDamaged
	// ScanAlways scans whenever no checkpoint is usable.
	ScanAlways
)

// OpenOptions choose how Open opens an existing cache. The zero value opens it for writing
// with the namespace the device shows, no placement and no scan.
type OpenOptions struct {
	// Device is how the path is opened (Open); ReadOnly and Exclusive follow ReadOnly, and
	// its QueueDepth, when set, is the engine's.
	Device   devices.Options
	ReadOnly bool
	// Namespace is the key namespace when nothing on the device tells it (an empty LMCache
	// v1 checkpoint); "" takes the device's. When given it must be object or legacy and
	// agree with what the device shows.
	Namespace engine.Namespace
	// Accept opens for writing even when the checkpoint choice is in doubt or a fallback
	// from a newer container may lose keys: the caller reports the choice and decides
	// whether to write (recover). Without it a writer is refused both.
	Accept bool
	// Context, when set, stops recovery's slot verification (engine.OpenOptions.Context).
	Context context.Context
	// Scan and ScanHint: when to rebuild from the slot headers, and the layout the caller
	// knows for it (engine.DetectScan).
	Scan     ScanMode
	ScanHint engine.ScanHint
	// Placement is the placement.Parse spec of the policy the writes are placed by, built
	// for the device's handles ("" or "none": no directives).
	Placement string
	// Tweak, when set, adjusts the detected config for the open device before recovery.
	Tweak func(dev blockdev.Device, cfg *engine.Config)
	// Opened, when set, is told what Open opened before recovery begins: the I/O engine
	// chosen and the notes of any fallback taken (devices.Opened.Notes), for the caller to
	// report.
	Opened func(*devices.Opened)
}

// ErrNamespaceUnknown refuses a writer when nothing tells the key namespace: a guess would
// put the wrong slot identity into every slot header it writes.
var ErrNamespaceUnknown = errors.New("the checkpoint does not record the key namespace and has no keys that tell it (an empty LMCache v1 checkpoint)")

// ErrBadNamespace: OpenOptions.Namespace is neither object nor legacy.
var ErrBadNamespace = errors.New("want object or legacy")

// NamespaceError: the namespace given is not the one the cache uses.
type NamespaceError struct {
	Given, Found engine.Namespace
	Source       string // what on the device shows Found
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("namespace %s given, but the cache uses the %s namespace (from %s)", e.Given, e.Found, e.Source)
}

// FallbackError refuses a writer whose checkpoint is a fallback from a newer container
// that could not be used: the first checkpoint written would replace it, and the keys only
// it holds with it.
type FallbackError struct{ Selection engine.Selection }

func (e *FallbackError) Error() string {
	return reports.Escape(e.Selection.Reason) + "; " + ChoiceOf(e.Selection).LostText() + ", and writing would replace it"
}

// Open opens the cache on path (devices.Open, with o.Device) and recovers it (OpenDevice).
func Open(path string, o OpenOptions) (*engine.Engine, error) {
	if err := o.checkNamespace(); err != nil {
		return nil, err
	}
	opt := o.Device
	opt.ReadOnly, opt.Exclusive = o.ReadOnly, !o.ReadOnly
	od, err := devices.OpenDevice(path, opt)
	if err != nil {
		return nil, err
	}
	if o.Opened != nil {
		o.Opened(od)
	}
	return OpenDevice(od.Block, path, o)
}

// OpenDevice recovers the cache on the open dev (named path in errors) as o chooses, and
// seeds the placement policy from the entries' handles (SeedPolicy) so that cache-salt
// keeps each salt on its handle from one open to the next. The engine owns dev; on failure
// dev is closed.
func OpenDevice(dev blockdev.Device, path string, o OpenOptions) (*engine.Engine, error) {
	d, err := Detect(dev, o)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return openDetected(dev, path, d, o)
}

// openDetected recovers the cache on dev with the layout d detected (Detect with o).
func openDetected(dev blockdev.Device, path string, d engine.Detection, o OpenOptions) (*engine.Engine, error) {
	cfg := d.Config
	cfg.ReadOnly, cfg.Periodic = o.ReadOnly, false
	if o.Device.QueueDepth > 0 {
		cfg.QueueDepth = o.Device.QueueDepth
	}
	pol, err := policyFor(dev, o.Placement)
	if err != nil {
		dev.Close()
		return nil, err
	}
	if pol != nil {
		// MetadataHandle stays placement.None: the engine asks the policy at each checkpoint,
		// after the seeding below.
		cfg.Placer = pol
	}
	if o.Tweak != nil {
		o.Tweak(dev, &cfg)
	}
	e, err := engine.OpenWith(dev, cfg, engine.OpenOptions{Context: o.Context, AcceptDoubt: o.Accept,
		Scan: o.Scan != ScanNever, ScanLayout: d.LayoutSource, Detected: &d}) // the checkpoints Detect read
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pol != nil {
		SeedPolicy(pol, e)
	}
	return e, nil
}

// Detect reads the layout, namespace and format of the checkpoint recovery will choose on
// dev (with o.Scan: the layout a rebuild from the slot headers uses), applies o.Namespace,
// and refuses a writer (not o.ReadOnly) what OpenDevice refuses it. Nothing is written.
func Detect(dev blockdev.Device, o OpenOptions) (engine.Detection, error) {
	if err := o.checkNamespace(); err != nil {
		return engine.Detection{}, err
	}
	d, err := engine.Detect(dev)
	if errors.Is(err, engine.ErrNoCheckpoint) && (o.Scan == ScanAlways || (o.Scan == ScanDamaged && errors.Is(err, engine.ErrCorrupt))) {
		d, err = engine.DetectScan(dev, o.ScanHint)
	}
	if err != nil {
		return d, err
	}
	sel := d.Selection
	switch {
	case o.Namespace != "":
		if sel.NamespaceSource != "" && sel.Namespace != o.Namespace {
			return d, &NamespaceError{Given: o.Namespace, Found: sel.Namespace, Source: sel.NamespaceSource}
		}
		d.Config.Namespace = o.Namespace
	case sel.NamespaceSource == "" && !o.ReadOnly:
		return d, ErrNamespaceUnknown
	}
	// A writer must not silently replace a newer checkpoint it could not use.
	if !o.ReadOnly && !o.Accept && sel.Fallback && !sel.Doubt && (!sel.LostKnown || sel.Lost > 0) {
		return d, &FallbackError{Selection: sel}
	}
	return d, nil
}

func (o OpenOptions) checkNamespace() error {
	if o.Namespace != "" && o.Namespace != engine.NamespaceObject && o.Namespace != engine.NamespaceLegacy {
		return fmt.Errorf("namespace %s: %w", reports.Escape(string(o.Namespace)), ErrBadNamespace)
	}
	return nil
}

// policyFor builds the policy spec names for dev's handles (nil for none).
func policyFor(dev blockdev.Device, spec string) (placement.Policy, error) {
	if spec == "" || spec == "none" {
		return nil, nil
	}
	info := dev.Info()
	p, err := placement.Parse(spec, info.Handles)
	if err != nil {
		err = fmt.Errorf("placement %s on %s: %w", spec, info.Path, err)
		if why := noHandlesWhy(dev); why != nil {
			err = fmt.Errorf("%w; %w", err, why)
		}
		return nil, err
	}
	if p.Name() == "none" {
		return nil, nil
	}
	return p, nil
}

// noHandlesWhy says why a block device opened through io_uring has no placement handles
// when the reason is its kernel write streams (e.g. Linux older than 6.16), or nil.
func noHandlesWhy(dev blockdev.Device) error {
	ws, ok := dev.(interface {
		WriteStreams() (blockdev.WriteStreams, error)
	})
	if !ok || dev.Info().Handles > 0 {
		return nil
	}
	if _, err := ws.WriteStreams(); errors.Is(err, blockdev.ErrWriteStreamsKernel) {
		return err
	}
	return nil
}

// SpaceWarning is a warning for a regular device file whose filesystem cannot hold the
// part of it no block backs yet (a sparse file on a nearly full filesystem): writes there
// will fail with ENOSPC and be refused. "" when there is nothing to say.
func SpaceWarning(path string) string {
	s, ok, err := blockdev.FileSpace(path)
	if err != nil || !ok || !s.Short() {
		return ""
	}
	return fmt.Sprintf("%s is a sparse file: %s of its %s are not allocated and its filesystem has %s free; writes past that will fail (ENOSPC) and be refused, not lost — free space there or preallocate it (fallocate -l %d %s)",
		path, units.FormatSize(s.Unallocated), units.FormatSize(s.Size), units.FormatSize(s.Available), s.Size, path)
}
