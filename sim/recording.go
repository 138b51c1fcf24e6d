package sim

import (
	"fmt"
	"math"

	"github.com/rbctl/rbctl/ftl"

	"github.com/rbctl/rbctl/workloads"
)

// Fit says which parts of a recording node's cache a replay of its recording
// (workloads.Source.Recorded) takes, because the caller set none of its own.
type Fit struct {
	Size      bool // the node's slots: a device that holds them, its target exactly them
	Eviction  bool // the node's eviction (lru, fifo or region)
	Admission bool // the node's admission policy
}

// fitRecording applies o.Fit for a recording's replay: the smallest device (in steps of
// 1/64 of the node's bytes) whose simulated cache has at least the node's slots, at the
// utilisation whose target is exactly them; and the node's eviction and admission. notes
// say what was taken.
func (o *Options) fitRecording(rd *workloads.Recorded, slotBytes int64) (notes []string, err error) {
	if o.Fit.Eviction {
		switch ev := workloads.Eviction(rd.Eviction); ev {
		case workloads.LRU, workloads.FIFO, workloads.Region:
			o.Workload.Eviction = ev
			notes = append(notes, "eviction "+rd.Eviction+" as the recording node's")
		default:
			notes = append(notes, fmt.Sprintf("the recording node's eviction %q is not replayed; %s", rd.Eviction, o.Workload.Eviction))
		}
	}
	if o.Fit.Admission && rd.Admission != "" {
		if err := workloads.CheckAdmission(rd.Admission); err == nil {
			o.Workload.Admission, o.Admissions = rd.Admission, []string{rd.Admission}
			notes = append(notes, "admission "+rd.Admission+" as the recording node's")
		}
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
		if err != nil || l.MaxSlots < slots {
			continue
		}
		util := float64(slots) / float64(l.MaxSlots)
		for workloads.TargetSlots(util, l.MaxSlots) < slots {
			util = math.Nextafter(util, 2)
		}
		o.DeviceSize, o.Workload.Util = size, min(util, 1)
		return append(notes, fmt.Sprintf("the recording node's %d slots: a %d-byte model device of %d slots at util %.6f", slots, size, l.MaxSlots, o.Workload.Util)), nil
	}
	return notes, fmt.Errorf("%w: no simulated device up to 4× the recording node's bytes holds its %d slots of %d bytes", workloads.ErrSpec, slots, slotBytes)
}
