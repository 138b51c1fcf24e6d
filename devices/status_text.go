package devices

import (
	"fmt"
	"strconv"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/units"
)

// Section is one part of a report for a person: lines of text, then a table when Header
// is set. The CLI renders the table; the content is decided here.
type Section struct {
	Lines  []string
	Header []string
	Rows   [][]string
}

// Sections is the FDP status for a person: the device, each configuration's handles, the
// placement handles' RUH status, the statistics and WAF, the emulator's FTL model, and the
// latest events.
func (s *FDPStatus) Sections() []Section {
	head := Section{Lines: []string{
		"Device       " + s.Device,
		fmt.Sprintf("Controller   %s (serial %s, firmware %s)", s.Model, s.Serial, s.Firmware),
		fmt.Sprintf("Namespace    %d, %d-byte blocks, endurance group %d", s.NSID, s.BlockSize, s.EnduranceGroup),
	}}
	state := "supported, DISABLED"
	if s.Enabled {
		state = fmt.Sprintf("supported, enabled, configuration %d of %d", s.ConfigIndex, len(s.cfgs.Configs))
	}
	head.Lines = append(head.Lines, "FDP          "+state)
	if s.WriteStreams != nil {
		head.Lines = append(head.Lines, "Streams      "+s.WriteStreams.String())
	}
	out := []Section{head}
	out = append(out, s.configSections()...)
	if s.Status != nil {
		out = append(out, s.handleSection())
	}
	if s.Stats != nil {
		out = append(out, s.statsSection())
	}
	if s.Emulator != nil {
		out = append(out, s.Emulator.section())
	}
	for _, l := range []struct {
		name string
		ev   *fdp.EventsLog
	}{{"host", s.hostEvents}, {"controller", s.ctrlEvents}} {
		if l.ev != nil {
			out = append(out, eventsSection(l.name, l.ev))
		}
	}
	return out
}

func (s *FDPStatus) configSections() []Section {
	var out []Section
	for i, c := range s.cfgs.Configs {
		if s.Enabled && i != int(s.ConfigIndex) {
			continue
		}
		valid := "valid"
		if !c.Valid() {
			valid = "NOT valid"
		}
		erutl := "none"
		if c.ERUTL > 0 {
			erutl = fmt.Sprintf("%d s", c.ERUTL)
		}
		sec := Section{Header: []string{"RUH", "Type", "Usage"}, Lines: []string{"", fmt.Sprintf(
			"Configuration %d: %s, %d reclaim group(s) (RGIF %d), %d reclaim unit handles, RU nominal size %s (%d B), RU time limit %s",
			i, valid, c.NRG, c.RGIF(), c.NRUH, human(c.RUNS), c.RUNS, erutl)}}
		for j, r := range c.RUHs {
			usage := "-"
			if s.Usage != nil && j < len(s.Usage.RUHUs) {
				usage = fdp.RUHAttr(s.Usage.RUHUs[j].RUHA).String()
			}
			sec.Rows = append(sec.Rows, []string{strconv.Itoa(j), r.String(), usage})
		}
		out = append(out, sec)
	}
	return out
}

func (s *FDPStatus) handleSection() Section {
	sec := Section{
		Lines:  []string{"", fmt.Sprintf("Placement handles (RUH status, %d descriptors; handle index i = fio plid i)", s.Status.NRUHSD)},
		Header: []string{"Index", "PID", "RG", "PH", "RUHID", "EARUTR (s)", "RUAMW (blocks)", "RUAMW", "RU written"},
	}
	var runs uint64
	rgif := uint8(0)
	if s.Enabled && int(s.ConfigIndex) < len(s.cfgs.Configs) {
		runs = s.cfgs.Configs[s.ConfigIndex].RUNS
		rgif = s.cfgs.Configs[s.ConfigIndex].RGIF()
	}
	for i, d := range s.Status.RUHSs {
		rg, ph := fdp.SplitPID(d.PID, rgif)
		bytes := d.RUAMW * uint64(max(s.BlockSize, 1))
		fill := "-"
		if runs > 0 && bytes <= runs {
			fill = fmt.Sprintf("%.1f %%", 100*float64(runs-bytes)/float64(runs))
		}
		sec.Rows = append(sec.Rows, []string{strconv.Itoa(i), fmt.Sprintf("%#04x", d.PID), strconv.Itoa(int(rg)), strconv.Itoa(int(ph)),
			strconv.Itoa(int(d.RUHID)), strconv.FormatUint(uint64(d.EARUTR), 10), strconv.FormatUint(d.RUAMW, 10), human(bytes), fill})
	}
	return sec
}

func (s *FDPStatus) statsSection() Section {
	src := "device"
	if s.Modelled {
		src = "FTL model of the emulated SSD"
	}
	st := s.Stats
	l := []string{"", "Statistics (" + src + ")",
		fmt.Sprintf("  HBMW  host bytes written   %s (%s)", st.HBMW, human(st.HBMW.Lo)),
		fmt.Sprintf("  MBMW  media bytes written  %s (%s)", st.MBMW, human(st.MBMW.Lo)),
		fmt.Sprintf("  MBE   media bytes erased   %s (%s)", st.MBE, human(st.MBE.Lo)),
	}
	if st.HBMW.IsZero() {
		l = append(l, "  WAF   -  (nothing written yet)")
	} else {
		l = append(l, fmt.Sprintf("  WAF   %.4f  (MBMW/HBMW since the counters started)", s.WAF))
	}
	if iv := s.Interval; iv != nil {
		waf := "-"
		if !iv.Delta.HBMW.IsZero() {
			waf = fmt.Sprintf("%.4f", iv.WAF)
		}
		l = append(l, fmt.Sprintf("  Last %.1f s: +%s host, +%s media, +%s erased, WAF %s", iv.Seconds,
			human(iv.Delta.HBMW.Lo), human(iv.Delta.MBMW.Lo), human(iv.Delta.MBE.Lo), waf))
	}
	return Section{Lines: l}
}

func (m *EmuModel) section() Section {
	sec := Section{
		Lines: []string{"", fmt.Sprintf("Emulator FTL model (this process; %s)", m.Spec),
			fmt.Sprintf("  RUs: %d total, %d free, %d open, %d closed; valid data %s; GC runs %d, relocated %s",
				m.TotalRUs, m.FreeRUs, m.OpenRUs, m.ClosedRUs, human(uint64(m.ValidBytes)), m.GCRuns, human(m.RelocatedBytes))},
		Header: []string{"RUH", "Isolation", "Host", "Media", "Relocated", "WAF"},
	}
	var written uint64
	for _, h := range m.Handles {
		written += h.HostBytes
	}
	if written == 0 {
		// The per-handle counters live in the process that writes (bench, emu serve, put);
		// the statistics log above is the device's, kept across processes.
		sec.Lines = append(sec.Lines, "  per handle: nothing written by this process (the statistics above count every process's writes;"+
			" the per-handle split is kept only by the process that writes: bench --per-handle, emu serve)")
		sec.Header = nil
		return sec
	}
	for i, h := range m.Handles {
		waf := "-"
		if h.HostBytes > 0 {
			waf = fmt.Sprintf("%.3f", float64(h.MediaBytes)/float64(h.HostBytes))
		}
		sec.Rows = append(sec.Rows, []string{strconv.Itoa(i), h.Isolation, human(h.HostBytes), human(h.MediaBytes), human(h.RelocatedBytes), waf})
	}
	return sec
}

func eventsSection(name string, ev *fdp.EventsLog) Section {
	if len(ev.Events) == 0 {
		return Section{Lines: []string{"", "Latest " + name + " events: none"}}
	}
	sec := Section{Lines: []string{"", "Latest " + name + " events"}, Header: []string{"Time (UTC)", "Type", "Event", "PID", "Where"}}
	for _, e := range ev.Events {
		pid, where := "-", "-"
		if e.Flags&fdp.EventFlagPIV != 0 {
			pid = fmt.Sprintf("%#04x", e.PID)
		}
		if e.Flags&fdp.EventFlagLV != 0 {
			where = fmt.Sprintf("RG %d RUH %d", e.RGID, e.RUHID)
		}
		sec.Rows = append(sec.Rows, []string{e.Time().UTC().Format("2006-01-02 15:04:05.000"), fmt.Sprintf("%#02x", uint8(e.Type)), e.Type.String(), pid, where})
	}
	return sec
}

// human is n bytes in binary units with two decimals ("1.00 MiB").
func human(n uint64) string { return units.FormatSizePrec(int64(min(n, 1<<63-1)), 2) }
