package fdp

import (
	"fmt"
	"io"
	"time"
)

// The normal (human) output of nvme-cli's fdp plugin, line for line, for each log and the
// RUH status, so `rbctl fdp X` and `nvme fdp X` can be diffed.

// WriteText prints the log as `nvme fdp configs` does; human adds the decoded FDPA bits
// (nvme-cli's -H).
func (l *ConfigLog) WriteText(w io.Writer, human bool) {
	for i, c := range l.Configs {
		fmt.Fprintf(w, "FDP Attributes: %#x\n", c.FDPA)
		if human {
			fmt.Fprintf(w, "  [7:7] : %#x\tFDP Configuration %sValid\n", c.FDPA>>7, map[bool]string{true: "", false: "In"}[c.Valid()])
			fmt.Fprintf(w, "  [4:4] : %#x\tFDP Volatile Write Cache %sPresent\n", (c.FDPA>>4)&1, map[bool]string{true: "", false: "Not "}[c.FDPA&FDPAVWC != 0])
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

// WriteText prints the log as `nvme fdp usage` does.
func (l *UsageLog) WriteText(w io.Writer) {
	for i, a := range l.Attrs {
		fmt.Fprintf(w, "Reclaim Unit Handle %d Attributes: %#x (%s)\n", i, uint8(a), a)
	}
}

// WriteText prints the log as `nvme fdp stats` does.
func (s *Stats) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Host Bytes with Metadata Written (HBMW): %s\n", s.HBMW)
	fmt.Fprintf(w, "Media Bytes with Metadata Written (MBMW): %s\n", s.MBMW)
	fmt.Fprintf(w, "Media Bytes Erased (MBE): %s\n", s.MBE)
}

// WriteText prints the log as `nvme fdp events` does.
func (l *EventsLog) WriteText(w io.Writer) {
	for i, e := range l.Events {
		fmt.Fprintf(w, "Event[%d]\n", i)
		fmt.Fprintf(w, "  Event Type: %#x (%s)\n", uint8(e.Type), e.Type)
		fmt.Fprintf(w, "  Event Timestamp: %d (%s)\n", e.Timestamp, e.Time().UTC().Format(time.ANSIC+" MST"))
		if e.Flags&EventFlagPIV != 0 {
			fmt.Fprintf(w, "  Placement Identifier (PID): %#x\n", e.PID)
		}
		if e.Flags&EventFlagNSIDV != 0 {
			fmt.Fprintf(w, "  Namespace Identifier (NSID): %d\n", e.NSID)
		}
		if e.Type == EventMediaReallocated {
			fmt.Fprintf(w, "  Number of LBAs Moved (NLBAM): %d\n", e.NLBAM)
			if e.LBAValid() {
				fmt.Fprintf(w, "  Logical Block Address (LBA): %#x\n", e.LBA)
			}
		}
		if e.Flags&EventFlagLV != 0 {
			fmt.Fprintf(w, "  Reclaim Group Identifier: %d\n", e.RGID)
			fmt.Fprintf(w, "  Reclaim Unit Handle Identifier: %d\n", e.RUHID)
		}
		fmt.Fprintln(w)
	}
}

// WriteText prints the RUH status as `nvme fdp status` does.
func (s *RUHStatus) WriteText(w io.Writer) {
	for _, d := range s.Descs {
		fmt.Fprintf(w, "Placement Identifier %d; Reclaim Unit Handle Identifier %d\n", d.PID, d.RUHID)
		fmt.Fprintf(w, "  Estimated Active Reclaim Unit Time Remaining (EARUTR): %d\n", d.EARUTR)
		fmt.Fprintf(w, "  Reclaim Unit Available Media Writes (RUAMW): %d\n", d.RUAMW)
		fmt.Fprintln(w)
	}
}

// WriteText prints the FDP feature as `nvme fdp feature` (without -c/-d) does.
func (f FeatureState) WriteText(w io.Writer, endgid uint16) {
	fmt.Fprintf(w, "Endurance Group                               : %d\n", endgid)
	fmt.Fprintf(w, "Flexible Direct Placement Enable (FDPE)       : %s\n", map[bool]string{true: "Yes", false: "No"}[f.Enabled])
	fmt.Fprintf(w, "Flexible Direct Placement Configuration Index : %d\n", f.ConfigIndex&0xf)
}
