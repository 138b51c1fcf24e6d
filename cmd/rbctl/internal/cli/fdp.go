package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

func init() { register(newFDPCmd) }

// rbctl fdp …: nvme-cli's fdp plugin (v2.x) with its flags, output lines and JSON keys, so
// the two can be diffed. Differences: -e defaults to the namespace's endurance group instead
// of being required, DEV may be an emu: spec, and update/set-events/feature changes need --yes.
func newFDPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fdp",
		Short: "NVMe Flexible Data Placement commands (nvme-cli fdp plugin compatible)",
		Long: `FDP log pages, reclaim unit handle status and update, and the FDP features, with
nvme-cli's flags and JSON field names. DEV is /dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an
emulated SSD spec (emu:PATH?size=...; see docs/emulator.md). A device without FDP gets
"FDP not supported" and exit status 2, and nothing is sent to it beyond Identify.`,
	}
	cmd.AddCommand(newFDPConfigsCmd(), newFDPUsageCmd(), newFDPStatsCmd(), newFDPEventsCmd(),
		newFDPStatusSubCmd(), newFDPUpdateCmd(), newFDPSetEventsCmd(), newFDPFeatureCmd())
	return cmd
}

// withEndgid opens DEV and resolves the endurance group (-e 0: the namespace's).
func withEndgid(dev string, endgid uint16, f func(t nvme.Transport, endgid uint16) error) error {
	t, _, err := openFDP(dev, 0)
	if err != nil {
		return err
	}
	defer t.Close()
	if endgid == 0 {
		if endgid, err = fdp.EnduranceGroup(t, 0); err != nil {
			return err
		}
	}
	return fdpError(dev, f(t, endgid))
}

// JSON shapes of nvme-cli's nvme-print-json.c.
type (
	configsJSON struct {
		N       uint16       `json:"n"`
		Configs []configJSON `json:"configs"`
	}
	configJSON struct {
		FDPA  uint8     `json:"fdpa"`
		VSS   uint8     `json:"vss"`
		NRG   uint32    `json:"nrg"`
		NRUH  uint16    `json:"nruh"`
		NNSS  uint32    `json:"nnss"`
		RUNS  uint64    `json:"runs"`
		ERUTL uint32    `json:"erutl"`
		RUHs  []ruhJSON `json:"ruhs"` // nvme-cli builds this array but does not attach it (v2.16)
	}
	ruhJSON struct {
		RUHT uint8 `json:"ruht"`
	}
	usageJSON struct {
		NRUH  int             `json:"nruh"`
		RUHUs []ruhUsageEntry `json:"ruhus"`
	}
	ruhUsageEntry struct {
		RUHA uint8 `json:"ruha"`
	}
	statusJSON struct {
		NRUHSD int                 `json:"nruhsd"`
		RUHSs  []fdp.RUHStatusDesc `json:"ruhss"`
	}
	eventsJSON struct {
		N      int         `json:"n"`
		Events []eventJSON `json:"events"`
	}
	eventJSON struct {
		Type      uint8   `json:"type"`
		FDPEF     uint8   `json:"fdpef"`
		PID       uint16  `json:"pid"`
		Timestamp uint64  `json:"timestamp"`
		NSID      uint32  `json:"nsid"`
		NLBAM     *uint16 `json:"nlbam,omitempty"`
		LBA       *uint64 `json:"lba,omitempty"`
		RGID      *uint16 `json:"rgid,omitempty"`
		RUHID     *uint8  `json:"ruhid,omitempty"`
	}
)

func configsToJSON(l *fdp.ConfigLog) configsJSON {
	j := configsJSON{N: uint16(len(l.Configs) - 1)}
	for _, c := range l.Configs {
		cj := configJSON{FDPA: c.FDPA, VSS: c.VSS, NRG: c.NRG, NRUH: c.NRUH, NNSS: c.NNSS, RUNS: c.RUNS, ERUTL: c.ERUTL, RUHs: []ruhJSON{}}
		for _, r := range c.RUHs {
			cj.RUHs = append(cj.RUHs, ruhJSON{RUHT: uint8(r)})
		}
		j.Configs = append(j.Configs, cj)
	}
	return j
}

func usageToJSON(l *fdp.UsageLog) usageJSON {
	j := usageJSON{NRUH: len(l.Attrs), RUHUs: []ruhUsageEntry{}}
	for _, a := range l.Attrs {
		j.RUHUs = append(j.RUHUs, ruhUsageEntry{RUHA: uint8(a)})
	}
	return j
}

func statusToJSON(s *fdp.RUHStatus) statusJSON {
	return statusJSON{NRUHSD: len(s.Descs), RUHSs: append([]fdp.RUHStatusDesc{}, s.Descs...)}
}

func eventsToJSON(l *fdp.EventsLog) eventsJSON {
	j := eventsJSON{N: len(l.Events), Events: []eventJSON{}}
	for _, e := range l.Events {
		ej := eventJSON{Type: uint8(e.Type), FDPEF: e.Flags, PID: e.PID, Timestamp: e.Timestamp, NSID: e.NSID}
		if e.Type == fdp.EventMediaReallocated {
			nlbam, lba := e.NLBAM, e.LBA
			ej.NLBAM, ej.LBA = &nlbam, &lba
		}
		if e.Flags&fdp.EventFlagLV != 0 {
			rg, ruh := e.RGID, e.RUHID
			ej.RGID, ej.RUHID = &rg, &ruh
		}
		j.Events = append(j.Events, ej)
	}
	return j
}

// Normal (human) output, line for line as nvme-cli prints it.

func printConfigs(w io.Writer, l *fdp.ConfigLog, human bool) {
	for i, c := range l.Configs {
		fmt.Fprintf(w, "FDP Attributes: %#x\n", c.FDPA)
		if human {
			fmt.Fprintf(w, "  [7:7] : %#x\tFDP Configuration %sValid\n", c.FDPA>>7, map[bool]string{true: "", false: "In"}[c.Valid()])
			fmt.Fprintf(w, "  [4:4] : %#x\tFDP Volatile Write Cache %sPresent\n", (c.FDPA>>4)&1, map[bool]string{true: "", false: "Not "}[c.FDPA&fdp.FDPAVWC != 0])
			fmt.Fprintf(w, "  [3:0] : %#x\tReclaim Group Identifier Format\n", c.RGIF())
		}
		fmt.Fprintf(w, "Vendor Specific Size: %d\n", c.VSS)
		fmt.Fprintf(w, "Number of Reclaim Groups: %d\n", c.NRG)
		fmt.Fprintf(w, "Number of Reclaim Unit Handles: %d\n", c.NRUH)
		fmt.Fprintf(w, "Number of Namespaces Supported: %d\n", c.NNSS)
		fmt.Fprintf(w, "Reclaim Unit Nominal Size: %d\n", c.RUNS)
		fmt.Fprintf(w, "Estimated Reclaim Unit Time Limit: %d\n", c.ERUTL)
		fmt.Fprintf(w, "Reclaim Unit Handle List:\n")
		for j, r := range c.RUHs {
			fmt.Fprintf(w, "  [%d]: %s\n", j, r)
		}
		if i < len(l.Configs)-1 {
			fmt.Fprintln(w)
		}
	}
}

func printUsage(w io.Writer, l *fdp.UsageLog) {
	for i, a := range l.Attrs {
		fmt.Fprintf(w, "Reclaim Unit Handle %d Attributes: %#x (%s)\n", i, uint8(a), a)
	}
}

func printStats(w io.Writer, s *fdp.Stats) {
	fmt.Fprintf(w, "Host Bytes with Metadata Written (HBMW): %s\n", s.HBMW)
	fmt.Fprintf(w, "Media Bytes with Metadata Written (MBMW): %s\n", s.MBMW)
	fmt.Fprintf(w, "Media Bytes Erased (MBE): %s\n", s.MBE)
}

func printEvents(w io.Writer, l *fdp.EventsLog) {
	for i, e := range l.Events {
		fmt.Fprintf(w, "Event[%d]\n", i)
		fmt.Fprintf(w, "  Event Type: %#x (%s)\n", uint8(e.Type), e.Type)
		fmt.Fprintf(w, "  Event Timestamp: %d (%s)\n", e.Timestamp, e.Time().UTC().Format(time.ANSIC+" MST"))
		if e.Flags&fdp.EventFlagPIV != 0 {
			fmt.Fprintf(w, "  Placement Identifier (PID): %#x\n", e.PID)
		}
		if e.Flags&fdp.EventFlagNSIDV != 0 {
			fmt.Fprintf(w, "  Namespace Identifier (NSID): %d\n", e.NSID)
		}
		if e.Type == fdp.EventMediaReallocated {
			fmt.Fprintf(w, "  Number of LBAs Moved (NLBAM): %d\n", e.NLBAM)
			if e.LBAValid() {
				fmt.Fprintf(w, "  Logical Block Address (LBA): %#x\n", e.LBA)
			}
		}
		if e.Flags&fdp.EventFlagLV != 0 {
			fmt.Fprintf(w, "  Reclaim Group Identifier: %d\n", e.RGID)
			fmt.Fprintf(w, "  Reclaim Unit Handle Identifier: %d\n", e.RUHID)
		}
		fmt.Fprintln(w)
	}
}

func printStatus(w io.Writer, s *fdp.RUHStatus) {
	for _, d := range s.Descs {
		fmt.Fprintf(w, "Placement Identifier %d; Reclaim Unit Handle Identifier %d\n", d.PID, d.RUHID)
		fmt.Fprintf(w, "  Estimated Active Reclaim Unit Time Remaining (EARUTR): %d\n", d.EARUTR)
		fmt.Fprintf(w, "  Reclaim Unit Available Media Writes (RUAMW): %d\n", d.RUAMW)
		fmt.Fprintln(w)
	}
}

// emit writes normal, json or raw output.
func emit(w io.Writer, mode string, raw []byte, js any, normal func(io.Writer)) error {
	switch mode {
	case "binary":
		_, err := w.Write(raw)
		return err
	case "json":
		return writeJSON(w, js)
	}
	normal(w)
	return nil
}

func newFDPConfigsCmd() *cobra.Command {
	var out outputFlags
	var endgid uint16
	var human bool
	cmd := &cobra.Command{
		Use:   "configs DEV",
		Short: "FDP Configurations log (0x20)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := out.mode()
			if err != nil {
				return err
			}
			return withEndgid(args[0], endgid, func(t nvme.Transport, endgid uint16) error {
				l, raw, err := fdp.ReadConfigs(t, endgid)
				if err != nil {
					return err
				}
				return emit(cmd.OutOrStdout(), mode, raw, configsToJSON(l), func(w io.Writer) { printConfigs(w, l, human) })
			})
		},
	}
	cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	cmd.Flags().BoolVarP(&human, "human-readable", "H", false, "decode the FDP attributes bits")
	out.add(cmd)
	return cmd
}

// fdpLogReader reads one FDP log for an endurance group and returns its raw bytes, the value
// printed by --output-format json, and the normal (human) printer.
type fdpLogReader func(t nvme.Transport, endgid uint16) (raw []byte, js any, normal func(io.Writer), err error)

// newFDPLogCmd builds a sub-command that prints one FDP log page (nvme-cli's flags).
func newFDPLogCmd(use, short string, read fdpLogReader) *cobra.Command {
	var out outputFlags
	var endgid uint16
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := out.mode()
			if err != nil {
				return err
			}
			return withEndgid(args[0], endgid, func(t nvme.Transport, endgid uint16) error {
				raw, js, normal, err := read(t, endgid)
				if err != nil {
					return err
				}
				return emit(cmd.OutOrStdout(), mode, raw, js, normal)
			})
		},
	}
	cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	out.add(cmd)
	return cmd
}

func newFDPUsageCmd() *cobra.Command {
	return newFDPLogCmd("usage DEV", "Reclaim Unit Handle Usage log (0x21)",
		func(t nvme.Transport, endgid uint16) ([]byte, any, func(io.Writer), error) {
			l, raw, err := fdp.ReadUsage(t, endgid)
			if err != nil {
				return nil, nil, nil, err
			}
			return raw, usageToJSON(l), func(w io.Writer) { printUsage(w, l) }, nil
		})
}

func newFDPStatsCmd() *cobra.Command {
	return newFDPLogCmd("stats DEV", "FDP Statistics log (0x22): HBMW, MBMW, MBE",
		func(t nvme.Transport, endgid uint16) ([]byte, any, func(io.Writer), error) {
			s, raw, err := fdp.ReadStats(t, endgid)
			if err != nil {
				return nil, nil, nil, err
			}
			return raw, s, func(w io.Writer) { printStats(w, s) }, nil
		})
}

func newFDPEventsCmd() *cobra.Command {
	var out outputFlags
	var endgid uint16
	var host bool
	cmd := &cobra.Command{
		Use:   "events DEV",
		Short: "FDP Events log (0x23): controller events, or host events with -E",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := out.mode()
			if err != nil {
				return err
			}
			return withEndgid(args[0], endgid, func(t nvme.Transport, endgid uint16) error {
				l, raw, err := fdp.ReadEvents(t, endgid, host)
				if err != nil {
					return err
				}
				return emit(cmd.OutOrStdout(), mode, raw, eventsToJSON(l), func(w io.Writer) { printEvents(w, l) })
			})
		},
	}
	cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	cmd.Flags().BoolVarP(&host, "host-events", "E", false, "host events instead of controller events")
	out.add(cmd)
	return cmd
}

func newFDPStatusSubCmd() *cobra.Command {
	var out outputFlags
	var nsid uint32
	cmd := &cobra.Command{
		Use:   "status DEV",
		Short: "Reclaim Unit Handle Status (I/O Management Receive): PID, RUHID, EARUTR, RUAMW",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := out.mode()
			if err != nil {
				return err
			}
			t, _, err := openFDP(args[0], nsid)
			if err != nil {
				return err
			}
			defer t.Close()
			s, raw, err := fdp.ReadRUHStatus(t, nsid)
			if err != nil {
				return fdpError(args[0], err)
			}
			return emit(cmd.OutOrStdout(), mode, raw, statusToJSON(s), func(w io.Writer) { printStatus(w, s) })
		},
	}
	cmd.Flags().Uint32VarP(&nsid, "namespace-id", "n", 0, "namespace (0: the device's)")
	out.add(cmd)
	return cmd
}
