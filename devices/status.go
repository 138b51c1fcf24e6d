package devices

import (
	"context"
	"fmt"
	"time"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// FDPStatus is everything `rbctl fdp-status` shows about a device: Identify, the FDP
// feature, the four FDP log pages, the RUH status, the WAF, and the emulator's FTL model
// or the kernel's write streams where they apply. The nested objects use nvme-cli's JSON
// keys (configs, ruhus, ruhss, hbmw/mbmw/mbe, events); the field order is the output's.
type FDPStatus struct {
	Device         string          `json:"device"`
	Model          string          `json:"mn"`
	Serial         string          `json:"sn"`
	Firmware       string          `json:"fr"`
	NSID           uint32          `json:"nsid"`
	BlockSize      int             `json:"block_size"`
	Supported      bool            `json:"fdp_supported"`
	Enabled        bool            `json:"fdp_enabled"`
	EnduranceGroup uint16          `json:"endgid"`
	ConfigIndex    uint8           `json:"fdpcidx"`
	Modelled       bool            `json:"stats_modelled"` // the emulator's statistics come from its FTL model
	Configs        fdp.ConfigsJSON `json:"configs"`
	Usage          *fdp.UsageJSON  `json:"usage,omitempty"`
	Status         *fdp.StatusJSON `json:"status,omitempty"`
	Stats          *fdp.Stats      `json:"stats,omitempty"`
	WAF            float64         `json:"waf"`
	HostEvents     *fdp.EventsJSON `json:"host_events,omitempty"`
	CtrlEvents     *fdp.EventsJSON `json:"controller_events,omitempty"`
	Interval       *FDPInterval    `json:"interval,omitempty"`
	// WriteStreams: the kernel's write streams when DEV is the namespace's block device.
	WriteStreams *WriteStreams `json:"write_streams,omitempty"`
	// Emulator is the emulated SSD's FTL state (emu: devices only): what the log pages do
	// not show.
	Emulator *EmuModel `json:"emulator,omitempty"`

	cfgs       *fdp.ConfigLog
	hostEvents *fdp.EventsLog
	ctrlEvents *fdp.EventsLog
	taken      time.Time
}

// FDPInterval is the activity between two readings of the status.
type FDPInterval struct {
	Seconds float64   `json:"seconds"`
	Delta   fdp.Stats `json:"delta"`
	WAF     float64   `json:"waf"`
}

// EmuModel is the FTL model behind an emulated SSD (model output, not a measurement).
type EmuModel struct {
	Spec           string      `json:"spec"`
	SpareFactor    float64     `json:"op"`
	GC             string      `json:"gc"`
	HostBytes      uint64      `json:"host_bytes"`
	MediaBytes     uint64      `json:"media_bytes"`
	RelocatedBytes uint64      `json:"relocated_bytes"`
	ErasedBytes    uint64      `json:"erased_bytes"`
	GCRuns         uint64      `json:"gc_runs"`
	ValidBytes     int64       `json:"valid_bytes"`
	TotalRUs       int         `json:"total_rus"`
	FreeRUs        int         `json:"free_rus"`
	OpenRUs        int         `json:"open_rus"`
	ClosedRUs      int         `json:"closed_rus"`
	Handles        []EmuHandle `json:"handles"`
}

// EmuHandle is one reclaim unit handle of the emulator's FTL model.
type EmuHandle struct {
	Isolation      string `json:"isolation"`
	HostBytes      uint64 `json:"host_bytes"`
	MediaBytes     uint64 `json:"media_bytes"`
	RelocatedBytes uint64 `json:"relocated_bytes"`
}

// EmuModelOf reads the FTL model of an emulated SSD.
func EmuModelOf(c *emu.Controller) *EmuModel {
	sp, st := c.Spec(), c.ModelStats()
	m := &EmuModel{
		Spec: sp.String(), SpareFactor: sp.OP, GC: sp.GC.String(),
		HostBytes: st.HostBytes, MediaBytes: st.MediaBytes, RelocatedBytes: st.RelocatedBytes,
		ErasedBytes: st.ErasedBytes, GCRuns: st.GCRuns, ValidBytes: st.ValidBytes,
		TotalRUs: st.TotalRUs, FreeRUs: st.FreeRUs, OpenRUs: st.OpenRUs, ClosedRUs: st.ClosedRUs,
	}
	for i, h := range st.Handles {
		iso := sp.Isolation
		if sp.HandleIsolation != nil {
			iso = sp.HandleIsolation[i]
		}
		m.Handles = append(m.Handles, EmuHandle{Isolation: iso.String(), HostBytes: h.HostBytes, MediaBytes: h.MediaBytes, RelocatedBytes: h.RelocatedBytes})
	}
	return m
}

// ReadFDPStatus reads the FDP status of the device behind t, named path, keeping the
// latest nevents of each events log. It only reads: nothing it sends changes the device.
// A controller without FDP fails with fdp.ErrFDPNotSupported after Identify only. With
// prev (an earlier reading) the status carries the interval since.
func ReadFDPStatus(t nvme.Transport, path string, nevents int, prev *FDPStatus) (*FDPStatus, error) {
	d, err := fdp.Discover(t)
	if err != nil {
		return nil, err
	}
	s := &FDPStatus{
		Device: path, Model: d.Model, Serial: d.Serial, Firmware: d.Firmware, NSID: d.NSID,
		BlockSize: d.BlockSize, Supported: d.Supported, Enabled: d.Feature.Enabled,
		EnduranceGroup: d.EnduranceGroup, ConfigIndex: d.Feature.ConfigIndex,
		Modelled: d.Model == emu.ModelNumber, cfgs: d.Configs, taken: time.Now(),
	}
	s.Configs = d.Configs.JSON()
	if !emu.IsSpec(path) {
		s.WriteStreams = WriteStreamsOf(path)
	}
	if c, ok := t.(*emu.Controller); ok {
		s.Emulator = EmuModelOf(c)
	}
	if d.Status != nil {
		st := d.Status.JSON()
		s.Status = &st
	}
	if u, _, err := fdp.ReadUsage(t, d.EnduranceGroup); err == nil {
		uj := u.JSON()
		s.Usage = &uj
	} else if !fdp.IsNotSupported(err) {
		return nil, fmt.Errorf("read RUH usage log: %w", err)
	}
	st, _, err := fdp.ReadStats(t, d.EnduranceGroup)
	if err != nil {
		return nil, fmt.Errorf("read FDP statistics log: %w", err)
	}
	s.Stats, s.WAF = st, st.WAF()
	for _, host := range []bool{true, false} {
		l, _, err := fdp.ReadEvents(t, d.EnduranceGroup, host)
		if err != nil {
			return nil, fmt.Errorf("read FDP events log: %w", err)
		}
		if len(l.Events) > nevents {
			l.Events = l.Events[len(l.Events)-nevents:]
		}
		ej := l.JSON()
		if host {
			s.HostEvents, s.hostEvents = &ej, l
		} else {
			s.CtrlEvents, s.ctrlEvents = &ej, l
		}
	}
	if prev != nil && prev.Stats != nil {
		delta := s.Stats.Sub(prev.Stats)
		s.Interval = &FDPInterval{Seconds: s.taken.Sub(prev.taken).Seconds(), Delta: delta, WAF: delta.WAF()}
	}
	return s, nil
}

// WatchFDPStatus reads the FDP status every interval (once when interval is 0) and hands
// each reading, with the interval since the previous one, to show; it stops after count
// readings (0: no limit), when show fails, or when ctx ends (returning nil).
func WatchFDPStatus(ctx context.Context, t nvme.Transport, path string, nevents int, interval time.Duration, count int, show func(i int, s *FDPStatus) error) error {
	var prev *FDPStatus
	for i := 0; ; i++ {
		s, err := ReadFDPStatus(t, path, nevents, prev)
		if err != nil {
			return err
		}
		if err := show(i, s); err != nil || interval <= 0 || (count > 0 && i+1 >= count) {
			return err
		}
		prev = s
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
