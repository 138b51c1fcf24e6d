package devices

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// FDP is an opened device's Flexible Data Placement: what discovery found when the device
// was opened (once), and the FDP commands, sent through the device's NVMe transport to its
// namespace and endurance group.
type FDP struct {
	t    nvme.Transport
	disc *fdp.Discovery
}

// NewFDP discovers the FDP state of the namespace behind t. A controller without FDP gives
// an error wrapping fdp.ErrFDPNotSupported after Identify Controller only; FDP supported
// but disabled is nvme.ErrFDPDisabled.
func NewFDP(t nvme.Transport) (*FDP, error) {
	d, err := fdp.Discover(t)
	if err != nil {
		return nil, err
	}
	if !d.Feature.Enabled {
		return nil, fmt.Errorf("FDP is disabled in endurance group %d: %w", d.EnduranceGroup, nvme.ErrFDPDisabled)
	}
	return &FDP{t: t, disc: d}, nil
}

// Discovery is what discovery found: the configuration in use, the RUH status at open,
// and the placement handle → PID table.
func (f *FDP) Discovery() *fdp.Discovery { return f.disc }

// Transport is the NVMe transport the commands go through.
func (f *FDP) Transport() nvme.Transport { return f.t }

// PIDs is the placement handle → PID table (handle i writes with PID PIDs[i]).
func (f *FDP) PIDs() []uint16 { return append([]uint16(nil), f.disc.PIDs...) }

// ReclaimUnitBytes is the nominal reclaim unit size of the configuration in use.
func (f *FDP) ReclaimUnitBytes() int64 {
	if f.disc.Config == nil {
		return 0
	}
	return int64(f.disc.Config.RUNS)
}

// ReclaimGroups is the number of reclaim groups of the configuration in use.
func (f *FDP) ReclaimGroups() int {
	if f.disc.Config == nil {
		return 0
	}
	return int(f.disc.Config.NRG)
}

// Stats reads the FDP statistics log of the namespace's endurance group.
func (f *FDP) Stats() (*fdp.Stats, error) {
	s, _, err := fdp.ReadStats(f.t, f.disc.EnduranceGroup)
	return s, err
}

// Configs reads the FDP configurations log.
func (f *FDP) Configs() (*fdp.ConfigLog, error) {
	l, _, err := fdp.ReadConfigs(f.t, f.disc.EnduranceGroup)
	return l, err
}

// Usage reads the reclaim unit handle usage log.
func (f *FDP) Usage() (*fdp.UsageLog, error) {
	l, _, err := fdp.ReadUsage(f.t, f.disc.EnduranceGroup)
	return l, err
}

// Events reads the host (host true) or controller FDP events log.
func (f *FDP) Events(host bool) (*fdp.EventsLog, error) {
	l, _, err := fdp.ReadEvents(f.t, f.disc.EnduranceGroup, host)
	return l, err
}

// RUHStatus reads the namespace's reclaim unit handle status now.
func (f *FDP) RUHStatus() (*fdp.RUHStatus, error) {
	s, _, err := fdp.ReadRUHStatus(f.t, f.disc.NSID)
	return s, err
}

// UpdateRUH moves each PID to a fresh reclaim unit (RUH Update) after checking it against
// the namespace's RUH status, so an unknown PID is refused with the list of valid ones
// before anything is sent.
func (f *FDP) UpdateRUH(pids []uint16) error { return UpdateRUH(f.t, f.disc.NSID, pids) }

// UpdateRUH is FDP.UpdateRUH on nsid (0: the transport's namespace) of any transport.
func UpdateRUH(t nvme.Transport, nsid uint32, pids []uint16) error {
	st, _, err := fdp.ReadRUHStatus(t, nsid)
	if err != nil {
		return err
	}
	if err := checkPIDs(st, pids); err != nil {
		return err
	}
	return fdp.UpdateRUH(t, nsid, pids)
}

// checkPIDs refuses a PID the RUH status does not list, naming the ones it does.
func checkPIDs(st *fdp.RUHStatus, pids []uint16) error {
	valid := map[uint16]bool{}
	names := make([]string, 0, len(st.Descs))
	for _, d := range st.Descs {
		valid[d.PID] = true
		names = append(names, strconv.Itoa(int(d.PID)))
	}
	for _, p := range pids {
		if !valid[p] {
			return fmt.Errorf("%w: PID %d is not a placement identifier of this namespace; its PIDs are %s", fdp.ErrBadPID, p, strings.Join(names, ","))
		}
	}
	return nil
}
