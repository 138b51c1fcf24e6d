package fdp

import (
	"fmt"

	"github.com/rbctl/rbctl/nvme"
)

// Commands an FDP host sends, built with package nvme's encoders so the real device and the
// emulated SSD see identical bytes. Log pages are read as nvme-cli reads them: LSI = the
// endurance group, NSID 0, CSI 0.

func logPage(lid nvme.LogID, endgid uint16, lsp uint8) nvme.LogPage {
	return nvme.LogPage{LID: lid, LSI: endgid, LSP: lsp}
}

// ReadConfigs reads the FDP Configurations log of an endurance group: the 16-byte header
// first for the size, then the whole log.
func ReadConfigs(t nvme.Transport, endgid uint16) (*ConfigLog, []byte, error) {
	hdr, err := nvme.GetLog(t, logPage(nvme.LogFDPConfigs, endgid, 0), cfgLogHdrSize)
	if err != nil {
		return nil, nil, err
	}
	size, err := ConfigLogSize(hdr)
	if err != nil {
		return nil, hdr, err
	}
	raw, err := nvme.GetLog(t, logPage(nvme.LogFDPConfigs, endgid, 0), roundUp4(size))
	if err != nil {
		return nil, nil, err
	}
	l, err := DecodeConfigLog(raw)
	return l, raw, err
}

// ReadUsage reads the RUH Usage log: the 8-byte header, then every descriptor.
func ReadUsage(t nvme.Transport, endgid uint16) (*UsageLog, []byte, error) {
	hdr, err := nvme.GetLog(t, logPage(nvme.LogRUHUsage, endgid, 0), usageHdrSize)
	if err != nil {
		return nil, nil, err
	}
	n, err := UsageLogNRUH(hdr)
	if err != nil {
		return nil, hdr, err
	}
	raw, err := nvme.GetLog(t, logPage(nvme.LogRUHUsage, endgid, 0), UsageLogSize(n))
	if err != nil {
		return nil, nil, err
	}
	l, err := DecodeUsageLog(raw)
	return l, raw, err
}

// ReadStats reads the 64-byte FDP Statistics log.
func ReadStats(t nvme.Transport, endgid uint16) (*Stats, []byte, error) {
	raw, err := nvme.GetLog(t, logPage(nvme.LogFDPStats, endgid, 0), StatsLogSize)
	if err != nil {
		return nil, nil, err
	}
	s, err := DecodeStats(raw)
	return s, raw, err
}

// ReadEvents reads the 4096-byte FDP Events log: host events (LSP 1) or controller events.
func ReadEvents(t nvme.Transport, endgid uint16, host bool) (*EventsLog, []byte, error) {
	var lsp uint8
	if host {
		lsp = 1
	}
	raw, err := nvme.GetLog(t, logPage(nvme.LogFDPEvents, endgid, lsp), EventsLogSize)
	if err != nil {
		return nil, nil, err
	}
	l, err := DecodeEventsLog(raw)
	return l, raw, err
}

// ReadRUHStatus sends I/O Management Receive (RUH Status) to nsid: a 16-byte header for
// the count, then the whole list. nsid 0 means the transport's namespace.
func ReadRUHStatus(t nvme.Transport, nsid uint32) (*RUHStatus, []byte, error) {
	nsid, err := ResolveNSID(t, nsid)
	if err != nil {
		return nil, nil, err
	}
	recv := func(n int) ([]byte, error) {
		b, _, err := nvme.IORead(t, n, func(buf []byte) (nvme.Command, error) {
			return nvme.IOMgmtRecv(nsid, nvme.IOMgmtRecvRUHStatus, 0, buf)
		})
		return b, err
	}
	hdr, err := recv(RUHStatusHdrSize)
	if err != nil {
		return nil, nil, err
	}
	n, err := RUHStatusCount(hdr)
	if err != nil {
		return nil, hdr, err
	}
	if n == 0 {
		s, err := DecodeRUHStatus(hdr)
		return s, hdr, err
	}
	raw, err := recv(RUHStatusSize(n))
	if err != nil {
		return nil, nil, err
	}
	s, err := DecodeRUHStatus(raw)
	return s, raw, err
}

// UpdateRUH sends I/O Management Send (RUH Update) for pids to nsid (0: the transport's):
// the controller closes the reclaim unit each PID's handle is writing and opens a new one.
func UpdateRUH(t nvme.Transport, nsid uint32, pids []uint16) error {
	nsid, err := ResolveNSID(t, nsid)
	if err != nil {
		return err
	}
	u := &RUHUpdate{PIDs: pids}
	cdw10, err := u.CDW10()
	if err != nil {
		return err
	}
	data := u.Encode()
	buf, err := alloc(len(data))
	if err != nil {
		return err
	}
	defer free(buf)
	copy(buf, data)
	c := nvme.IOMgmtSend(nsid, nvme.IOMgmtSendRUHUpdate, uint16(cdw10>>16), buf[:len(data)])
	_, err = nvme.RunIO(t, &c)
	return err
}

// GetFeature reads the FDP feature (0x1D) of an endurance group.
func GetFeature(t nvme.Transport, endgid uint16) (FeatureState, error) {
	dw0, _, err := nvme.GetFeature(t, nvme.FeatFDP, nvme.SelCurrent, 0, uint32(endgid), 0)
	if err != nil {
		return FeatureState{}, err
	}
	return DecodeFeature(dw0), nil
}

// SetFeature enables or disables FDP in an endurance group with a configuration index
// (Set Features 0x1D, NSID all, as nvme-cli sends it).
func SetFeature(t nvme.Transport, endgid uint16, f FeatureState, save bool) error {
	c := nvme.SetFeatures(nvme.FeatFDP, save, nvme.NSIDAll, uint32(endgid), f.Value(), nil)
	_, err := nvme.RunAdmin(t, &c)
	return err
}

// SupportedEventTypes lists every FDP event type; GetEventEnables asks for all of them.
var SupportedEventTypes = []EventType{
	EventRUNotFullyWritten, EventRUTimeLimitExceeded, EventCtrlResetModifiedRUHs, EventInvalidPID,
	EventMediaReallocated, EventImplicitlyModifiedRUH,
}

// GetEventEnables reads the FDP Events feature (0x1E) of placement handle ph of nsid: which
// event types the controller supports for it and whether each is enabled.
func GetEventEnables(t nvme.Transport, nsid uint32, ph uint16) ([]EventEnable, error) {
	nsid, err := ResolveNSID(t, nsid)
	if err != nil {
		return nil, err
	}
	const noet = 255
	dw0, data, err := nvme.GetFeature(t, nvme.FeatFDPEvents, nvme.SelCurrent, nsid, EventsFeatureCDW11(ph, noet), roundUp4(2*noet))
	if err != nil {
		return nil, err
	}
	n := int(dw0 & 0xff)
	return DecodeEventEnables(data, n)
}

// SetEventEnables enables or disables event types for placement handle ph of nsid (Set
// Features 0x1E). nvme-cli sends a 255-byte buffer; so does this.
func SetEventEnables(t nvme.Transport, nsid uint32, ph uint16, types []EventType, enable, save bool) error {
	nsid, err := ResolveNSID(t, nsid)
	if err != nil {
		return err
	}
	if len(types) == 0 || len(types) > 255 {
		return fmt.Errorf("%w: %d event types (1..255)", ErrBadSize, len(types))
	}
	buf, err := alloc(255)
	if err != nil {
		return err
	}
	defer free(buf)
	copy(buf, EncodeEventTypes(types))
	var cdw12 uint32
	if enable {
		cdw12 = 1
	}
	c := nvme.SetFeatures(nvme.FeatFDPEvents, save, nsid, EventsFeatureCDW11(ph, uint8(len(types))), cdw12, buf[:255])
	_, err = nvme.RunAdmin(t, &c)
	return err
}

func roundUp4(n int) int { return (n + 3) &^ 3 }
