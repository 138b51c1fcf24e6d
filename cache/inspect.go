package cache

import (
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// InspectAll inspects every device of a cache (cachereport.Inspect) at once, a goroutine
// each, without writing; open opens one read-only. A device that cannot be opened or read
// has its own failure in the report, and the others are inspected all the same. The paths
// must be distinct (devices.Distinct). The error is nil when every device was read, else a
// *cachereport.DevicesError (fs.ErrNotExist only when every failure is a missing device).
func InspectAll(paths []string, open func(path string) (blockdev.Device, error), opts cachereport.InspectOptions) (*cachereport.Inspections, error) {
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
			reps[i], errs[i] = cachereport.Inspect(dev, p, opts)
		}()
	}
	wg.Wait()
	return cachereport.NewInspections(paths, reps, errs)
}
