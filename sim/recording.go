package sim

import (
	"fmt"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/workloads"
)

// fitRecording applies o.Fit for a recording's replay (workloads.Source.Recorded): the
// node's eviction and admission, and the smallest device (in steps of 1/64 of the node's
// bytes) whose simulated cache has at least the node's slots, at the utilisation whose
// target is exactly them. notes say what was taken.
func (o *Options) fitRecording(rd *workloads.Recorded, slotBytes int64) (notes []string, err error) {
	notes = rd.Policies(o.Fit, &o.Workload)
	if o.Fit.Admission && o.Workload.Admission == rd.Admission {
		o.Admissions = []string{rd.Admission}
	}
	slots := rd.Capacity.Slots
	if !o.Fit.Size || slots <= 0 || o.Sweep != nil {
		return notes, nil
	}
	step := max(slots*slotBytes/64, 1<<20)
	for size := slots * slotBytes; size < 4*slots*slotBytes+64<<20; size += step {
		ru, unit, err := Geometry(size, slotBytes, o.RUBytes, o.MappingUnit)
		if err != nil {
			continue
		}
		l, err := Layout(ftl.Config{MappingUnit: unit, LogicalBytes: size / unit * unit, RUBytes: ru}, slotBytes, 0)
		if err != nil {
			continue
		}
		if util, ok := workloads.FitUtil(slots, l.MaxSlots); ok {
			o.DeviceSize, o.Workload.Util = size, util
			return append(notes, fmt.Sprintf("the recording node's %d slots: a %d-byte model device of %d slots at util %.6f", slots, size, l.MaxSlots, util)), nil
		}
	}
	return notes, fmt.Errorf("%w: no simulated device up to 4× the recording node's bytes holds its %d slots of %d bytes", workloads.ErrSpec, slots, slotBytes)
}
