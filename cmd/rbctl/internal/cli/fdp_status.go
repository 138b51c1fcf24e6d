package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

func init() { register(newFDPStatusCmd) }

// fdpStatus is everything `rbctl fdp-status` shows. The nested objects use nvme-cli's JSON
// keys (configs, ruhus, ruhss, hbmw/mbmw/mbe, events).
type fdpStatus struct {
	Device         string       `json:"device"`
	Model          string       `json:"mn"`
	Serial         string       `json:"sn"`
	Firmware       string       `json:"fr"`
	NSID           uint32       `json:"nsid"`
	BlockSize      int          `json:"block_size"`
	Supported      bool         `json:"fdp_supported"`
	Enabled        bool         `json:"fdp_enabled"`
	EnduranceGroup uint16       `json:"endgid"`
	ConfigIndex    uint8        `json:"fdpcidx"`
	Modelled       bool         `json:"stats_modelled"` // the emulator's statistics come from its FTL model
	Configs        configsJSON  `json:"configs"`
	Usage          *usageJSON   `json:"usage,omitempty"`
	Status         *statusJSON  `json:"status,omitempty"`
	Stats          *fdp.Stats   `json:"stats,omitempty"`
	WAF            float64      `json:"waf"`
	HostEvents     *eventsJSON  `json:"host_events,omitempty"`
	CtrlEvents     *eventsJSON  `json:"controller_events,omitempty"`
	Interval       *fdpInterval `json:"interval,omitempty"`
	// WriteStreams: the kernel's write streams when DEV is the namespace's block device.
	WriteStreams *writeStreamsJSON `json:"write_streams,omitempty"`
	// Emulator is the emulated SSD's FTL state (emu: devices only): what the log pages do
	// not show.
	Emulator *emuModelJSON `json:"emulator,omitempty"`

	cfgs       *fdp.ConfigLog
	hostEvents *fdp.EventsLog
	ctrlEvents *fdp.EventsLog
	taken      time.Time
}

// emuModelJSON is the FTL model behind an emulated SSD (model output, not a measurement).
type emuModelJSON struct {
	Spec           string          `json:"spec"`
	SpareFactor    float64         `json:"op"`
	GC             string          `json:"gc"`
	HostBytes      uint64          `json:"host_bytes"`
	MediaBytes     uint64          `json:"media_bytes"`
	RelocatedBytes uint64          `json:"relocated_bytes"`
	ErasedBytes    uint64          `json:"erased_bytes"`
	GCRuns         uint64          `json:"gc_runs"`
	ValidBytes     int64           `json:"valid_bytes"`
	TotalRUs       int             `json:"total_rus"`
	FreeRUs        int             `json:"free_rus"`
	OpenRUs        int             `json:"open_rus"`
	ClosedRUs      int             `json:"closed_rus"`
	Handles        []emuHandleJSON `json:"handles"`
}

type emuHandleJSON struct {
	Isolation      string `json:"isolation"`
	HostBytes      uint64 `json:"host_bytes"`
	MediaBytes     uint64 `json:"media_bytes"`
	RelocatedBytes uint64 `json:"relocated_bytes"`
}

func emuModel(c *emu.Controller) *emuModelJSON {
	sp, st := c.Spec(), c.ModelStats()
	m := &emuModelJSON{
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
		m.Handles = append(m.Handles, emuHandleJSON{Isolation: iso.String(), HostBytes: h.HostBytes, MediaBytes: h.MediaBytes, RelocatedBytes: h.RelocatedBytes})
	}
	return m
}

// fdpInterval is the activity between two refreshes of --watch.
type fdpInterval struct {
	Seconds float64   `json:"seconds"`
	Delta   fdp.Stats `json:"delta"`
	WAF     float64   `json:"waf"`
}

// collectFDPStatus reads everything through t. It fails with ErrFDPNotSupported (after
// Identify only) on a controller without FDP.
func collectFDPStatus(t nvme.Transport, dev string, nevents int) (*fdpStatus, error) {
	d, err := fdp.Discover(t)
	if err != nil {
		return nil, err
	}
	s := &fdpStatus{
		Device: dev, Model: d.Model, Serial: d.Serial, Firmware: d.Firmware, NSID: d.NSID,
		BlockSize: d.BlockSize, Supported: d.Supported, Enabled: d.Feature.Enabled,
		EnduranceGroup: d.EnduranceGroup, ConfigIndex: d.Feature.ConfigIndex,
		Modelled: d.Model == emu.ModelNumber, cfgs: d.Configs, taken: time.Now(),
	}
	s.Configs = configsToJSON(d.Configs)
	if !emu.IsSpec(dev) {
		s.WriteStreams = writeStreamsOf(dev)
	}
	if c, ok := t.(*emu.Controller); ok {
		s.Emulator = emuModel(c)
	}
	if d.Status != nil {
		st := statusToJSON(d.Status)
		s.Status = &st
	}
	if u, _, err := fdp.ReadUsage(t, d.EnduranceGroup); err == nil {
		uj := usageToJSON(u)
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
		ej := eventsToJSON(l)
		if host {
			s.HostEvents, s.hostEvents = &ej, l
		} else {
			s.CtrlEvents, s.ctrlEvents = &ej, l
		}
	}
	return s, nil
}

func newFDPStatusCmd() *cobra.Command {
	var asJSON bool
	var watch time.Duration
	var count, nevents int
	cmd := &cobra.Command{
		Use:   "fdp-status DEV",
		Short: "Everything FDP about a device on one screen: configuration, RUH usage and status, statistics and WAF, events",
		Long: `fdp-status reads Identify, the FDP feature, the four FDP log pages and the RUH status
of DEV (/dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an emu: spec) and prints them on one screen.
WAF = MBMW/HBMW. With --watch it refreshes and also shows the WAF over each interval.
It only reads: nothing it sends changes the device. A device without FDP gets
"FDP not supported" and exit status 2.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev := args[0]
			t, _, err := openFDP(dev, 0)
			if err != nil {
				return err
			}
			defer t.Close()
			return runFDPStatus(cmd.Context(), cmd.OutOrStdout(), t, dev, asJSON, watch, count, nevents)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (nvme-cli field names inside)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every DUR (e.g. 2s) until interrupted, with the WAF over each interval")
	cmd.Flags().IntVar(&count, "count", 0, "with --watch: stop after this many refreshes (0: until interrupted)")
	cmd.Flags().IntVar(&nevents, "events", 5, "latest events to show from each events log")
	return cmd
}

func runFDPStatus(ctx context.Context, w io.Writer, t nvme.Transport, dev string, asJSON bool, watch time.Duration, count, nevents int) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var prev *fdpStatus
	for i := 0; ; i++ {
		s, err := collectFDPStatus(t, dev, nevents)
		if err != nil {
			return fdpError(dev, err)
		}
		if prev != nil && prev.Stats != nil && s.Stats != nil {
			d := s.Stats.Sub(prev.Stats)
			s.Interval = &fdpInterval{Seconds: s.taken.Sub(prev.taken).Seconds(), Delta: d, WAF: d.WAF()}
		}
		if asJSON {
			err = writeJSON(w, s)
		} else {
			if watch > 0 && isTerminal(w) {
				fmt.Fprint(w, "\033[H\033[2J")
			} else if i > 0 {
				fmt.Fprintln(w)
			}
			err = printFDPStatus(w, s)
		}
		if err != nil || watch <= 0 || (count > 0 && i+1 >= count) {
			return err
		}
		prev = s
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return ctx.Err()
		case <-time.After(watch):
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func human(n uint64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(u)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f %ciB", v, u[i])
}

func printFDPStatus(w io.Writer, s *fdpStatus) error {
	fmt.Fprintf(w, "Device       %s\n", s.Device)
	fmt.Fprintf(w, "Controller   %s (serial %s, firmware %s)\n", s.Model, s.Serial, s.Firmware)
	fmt.Fprintf(w, "Namespace    %d, %d-byte blocks, endurance group %d\n", s.NSID, s.BlockSize, s.EnduranceGroup)
	state := "supported, DISABLED (enable: rbctl fdp feature DEV -c 0 --yes)"
	if s.Enabled {
		state = fmt.Sprintf("supported, enabled, configuration %d of %d", s.ConfigIndex, len(s.cfgs.Configs))
	}
	fmt.Fprintf(w, "FDP          %s\n", state)
	if s.WriteStreams != nil {
		fmt.Fprintf(w, "Streams      %s\n", writeStreamsText(s.WriteStreams))
	}

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
		fmt.Fprintf(w, "\nConfiguration %d: %s, %d reclaim group(s) (RGIF %d), %d reclaim unit handles, RU nominal size %s (%d B), RU time limit %s\n",
			i, valid, c.NRG, c.RGIF(), c.NRUH, human(c.RUNS), c.RUNS, erutl)
		rows := make([][]string, len(c.RUHs))
		for j, r := range c.RUHs {
			usage := "-"
			if s.Usage != nil && j < len(s.Usage.RUHUs) {
				usage = fdp.RUHAttr(s.Usage.RUHUs[j].RUHA).String()
			}
			rows[j] = []string{strconv.Itoa(j), r.String(), usage}
		}
		if err := fdpTable(w, []string{"RUH", "Type", "Usage"}, rows); err != nil {
			return err
		}
	}

	if s.Status != nil {
		fmt.Fprintf(w, "\nPlacement handles (RUH status, %d descriptors; handle index i = fio plid i)\n", s.Status.NRUHSD)
		var runs uint64
		rgif := uint8(0)
		if s.Enabled && int(s.ConfigIndex) < len(s.cfgs.Configs) {
			runs = s.cfgs.Configs[s.ConfigIndex].RUNS
			rgif = s.cfgs.Configs[s.ConfigIndex].RGIF()
		}
		rows := make([][]string, len(s.Status.RUHSs))
		for i, d := range s.Status.RUHSs {
			rg, ph := fdp.SplitPID(d.PID, rgif)
			bytes := d.RUAMW * uint64(max(s.BlockSize, 1))
			fill := "-"
			if runs > 0 && bytes <= runs {
				fill = fmt.Sprintf("%.1f %%", 100*float64(runs-bytes)/float64(runs))
			}
			rows[i] = []string{strconv.Itoa(i), fmt.Sprintf("%#04x", d.PID), strconv.Itoa(int(rg)), strconv.Itoa(int(ph)),
				strconv.Itoa(int(d.RUHID)), strconv.FormatUint(uint64(d.EARUTR), 10), strconv.FormatUint(d.RUAMW, 10), human(bytes), fill}
		}
		if err := fdpTable(w, []string{"Index", "PID", "RG", "PH", "RUHID", "EARUTR (s)", "RUAMW (blocks)", "RUAMW", "RU written"}, rows); err != nil {
			return err
		}
	}

	if s.Stats != nil {
		src := "device"
		if s.Modelled {
			src = "FTL model of the emulated SSD"
		}
		fmt.Fprintf(w, "\nStatistics (%s)\n", src)
		fmt.Fprintf(w, "  HBMW  host bytes written   %s (%s)\n", s.Stats.HBMW, human(s.Stats.HBMW.Lo))
		fmt.Fprintf(w, "  MBMW  media bytes written  %s (%s)\n", s.Stats.MBMW, human(s.Stats.MBMW.Lo))
		fmt.Fprintf(w, "  MBE   media bytes erased   %s (%s)\n", s.Stats.MBE, human(s.Stats.MBE.Lo))
		if s.Stats.HBMW.IsZero() {
			fmt.Fprintf(w, "  WAF   -  (nothing written yet)\n")
		} else {
			fmt.Fprintf(w, "  WAF   %.4f  (MBMW/HBMW since the counters started)\n", s.WAF)
		}
		if iv := s.Interval; iv != nil {
			waf := "-"
			if !iv.Delta.HBMW.IsZero() {
				waf = fmt.Sprintf("%.4f", iv.WAF)
			}
			fmt.Fprintf(w, "  Last %.1f s: +%s host, +%s media, +%s erased, WAF %s\n", iv.Seconds,
				human(iv.Delta.HBMW.Lo), human(iv.Delta.MBMW.Lo), human(iv.Delta.MBE.Lo), waf)
		}
	}

	if m := s.Emulator; m != nil {
		fmt.Fprintf(w, "\nEmulator FTL model (this process; %s)\n", m.Spec)
		fmt.Fprintf(w, "  RUs: %d total, %d free, %d open, %d closed; valid data %s; GC runs %d, relocated %s\n",
			m.TotalRUs, m.FreeRUs, m.OpenRUs, m.ClosedRUs, human(uint64(m.ValidBytes)), m.GCRuns, human(m.RelocatedBytes))
		rows := make([][]string, len(m.Handles))
		for i, h := range m.Handles {
			waf := "-"
			if h.HostBytes > 0 {
				waf = fmt.Sprintf("%.3f", float64(h.MediaBytes)/float64(h.HostBytes))
			}
			rows[i] = []string{strconv.Itoa(i), h.Isolation, human(h.HostBytes), human(h.MediaBytes), human(h.RelocatedBytes), waf}
		}
		if err := fdpTable(w, []string{"RUH", "Isolation", "Host", "Media", "Relocated", "WAF"}, rows); err != nil {
			return err
		}
	}

	for _, l := range []struct {
		name string
		ev   *fdp.EventsLog
	}{{"host", s.hostEvents}, {"controller", s.ctrlEvents}} {
		if l.ev == nil {
			continue
		}
		if len(l.ev.Events) == 0 {
			fmt.Fprintf(w, "\nLatest %s events: none\n", l.name)
			continue
		}
		fmt.Fprintf(w, "\nLatest %s events\n", l.name)
		rows := make([][]string, len(l.ev.Events))
		for i, e := range l.ev.Events {
			pid, where := "-", "-"
			if e.Flags&fdp.EventFlagPIV != 0 {
				pid = fmt.Sprintf("%#04x", e.PID)
			}
			if e.Flags&fdp.EventFlagLV != 0 {
				where = fmt.Sprintf("RG %d RUH %d", e.RGID, e.RUHID)
			}
			rows[i] = []string{e.Time().UTC().Format("2006-01-02 15:04:05.000"), fmt.Sprintf("%#02x", uint8(e.Type)), e.Type.String(), pid, where}
		}
		if err := fdpTable(w, []string{"Time (UTC)", "Type", "Event", "PID", "Where"}, rows); err != nil {
			return err
		}
	}
	return nil
}
