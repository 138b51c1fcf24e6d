package cache

import (
	"fmt"
	"sort"
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// InspectOptions choose what Inspect reads besides the metadata.
type InspectOptions struct {
	Keys    bool // list the keys
	MaxKeys int  // with Keys, at most this many (0: all)
	Verify  bool // read every slot header and report the entries recovery would drop
}

// Inspect reads the cache on dev (named path in the report) without writing, and closes
// dev: the layout, both metadata containers, the checkpoint choice and the index recovered
// read-only as OpenDevice recovers it. When the index cannot be recovered it returns the
// containers and the choice read so far with the error; WriteText then shows those.
func Inspect(dev blockdev.Device, path string, opts InspectOptions) (*cachereport.Inspection, error) {
	o := OpenOptions{ReadOnly: true, Tweak: func(_ blockdev.Device, c *engine.Config) { c.VerifyOnLoad = opts.Verify }}
	d, err := Detect(dev, o)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg := d.Config
	infos, err := engine.ReadContainers(dev, cfg)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lay, _ := engine.ReadLayout(dev, cfg)
	r := &cachereport.Inspection{Device: path, Layout: LayoutOf(lay, cfg), BytesBySalt: map[string]int64{}, Choice: ChoiceOf(d.Selection),
		KeysListed: opts.Keys, Verified: opts.Verify}
	for _, c := range infos {
		ic := cachereport.Container{Index: c.Index, Offset: c.Offset, Valid: c.Valid, Seq: c.Seq, PayloadLen: c.PayloadLen,
			CRC: fmt.Sprintf("%08x", c.CRC), Format: string(c.Format), Problem: c.Problem}
		if c.PayloadLen > 0 && c.Problem != "empty" {
			ic.ComputedCRC = fmt.Sprintf("%08x", c.ComputedCRC)
		}
		// Sound header and CRC, but a payload that does not decode: recovery found it invalid.
		if cd := d.Selection.Candidates[c.Index]; c.Valid && !cd.Usable && cd.Problem != "" {
			ic.Valid, ic.Problem = false, cd.Problem
		}
		r.Containers = append(r.Containers, ic)
	}
	e, err := openDetected(dev, path, d, o)
	if err != nil {
		return r, err
	}
	defer e.Close()
	st := e.Stats().Recovery
	u := e.Usage()
	r.Opened, r.Format = true, string(st.Format)
	r.UsedFrom, r.Seq, r.Choice = st.Container, st.Seq, ChoiceOf(st.Selection)
	r.Entries, r.SlotsFree, r.NextSlot, r.Usage = u.SlotsUsed, u.SlotsFree, u.NextSlot, u.Fraction
	r.BytesBySalt = u.BytesBySalt
	r.Dropped = droppedOf(st.Dropped)
	if opts.Keys {
		r.Keys = Keys(e, "")
		sort.Slice(r.Keys, func(i, j int) bool { return r.Keys[i].Slot < r.Keys[j].Slot })
		if opts.MaxKeys > 0 && len(r.Keys) > opts.MaxKeys {
			r.Keys = r.Keys[:opts.MaxKeys]
		}
	}
	return r, nil
}

// InspectAll inspects every device of a cache (Inspect) at once, a goroutine each, without
// writing; open opens one read-only. A device that cannot be opened or read has its own
// failure in the report, and the others are inspected all the same. The paths must be
// distinct (devices.Distinct). The error is nil when every device was read, else a
// *cachereport.DevicesError (fs.ErrNotExist only when every failure is a missing device).
func InspectAll(paths []string, open func(path string) (blockdev.Device, error), opts InspectOptions) (*cachereport.Inspections, error) {
	if err := devices.Distinct(paths); err != nil {
		return nil, err
	}
	reps, errs := make([]*cachereport.Inspection, len(paths)), make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, err := open(p)
			if err != nil {
				errs[i] = err
				return
			}
			reps[i], errs[i] = Inspect(dev, p, opts)
		}()
	}
	wg.Wait()
	return cachereport.NewInspections(paths, reps, errs)
}
