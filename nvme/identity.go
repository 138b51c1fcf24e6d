package nvme

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// Identity is what Identify Controller and Identify Namespace say, with nvme-cli's JSON
// field names (`nvme id-ctrl -o json`, `nvme id-ns -o json`) for the fields both print,
// flattened into one object, then values derived from them. Field order is the output's.
type Identity struct {
	// controller (nvme id-ctrl)
	VID       uint16 `json:"vid"`
	SSVID     uint16 `json:"ssvid"`
	SN        string `json:"sn"`
	MN        string `json:"mn"`
	FR        string `json:"fr"`
	RAB       uint8  `json:"rab"`
	IEEE      uint32 `json:"ieee"`
	CMIC      uint8  `json:"cmic"`
	MDTS      uint8  `json:"mdts"`
	CNTLID    uint16 `json:"cntlid"`
	VER       uint32 `json:"ver"`
	OAES      uint32 `json:"oaes"`
	CTRATT    uint32 `json:"ctratt"`
	OACS      uint16 `json:"oacs"`
	LPA       uint8  `json:"lpa"`
	ENDGIDMAX uint16 `json:"endgidmax"`
	SQES      uint8  `json:"sqes"`
	CQES      uint8  `json:"cqes"`
	MAXCMD    uint16 `json:"maxcmd"`
	NN        uint32 `json:"nn"`
	ONCS      uint16 `json:"oncs"`
	VWC       uint8  `json:"vwc"`
	SGLS      uint32 `json:"sgls"`
	SubNQN    string `json:"subnqn"`
	// namespace (nvme id-ns)
	NSID   uint32          `json:"nsid"`
	NSZE   uint64          `json:"nsze"`
	NCAP   uint64          `json:"ncap"`
	NUSE   uint64          `json:"nuse"`
	NSFEAT uint8           `json:"nsfeat"`
	NLBAF  uint8           `json:"nlbaf"`
	FLBAS  uint8           `json:"flbas"`
	DPS    uint8           `json:"dps"`
	ENDGID uint16          `json:"endgid"`
	NGUID  string          `json:"nguid"`
	EUI64  string          `json:"eui64"`
	LBAFs  []LBAFormatJSON `json:"lbafs"`
	// derived
	LBADS          uint8  `json:"lbads"`
	MS             uint16 `json:"ms"`
	BlockSize      int    `json:"block_size"`
	CapacityBytes  int64  `json:"capacity_bytes"`
	MaxTransfer    int    `json:"max_transfer_bytes"`
	EnduranceGroup uint16 `json:"endurance_group"`
	FDPSupported   bool   `json:"fdp_supported"`
	DSMSupported   bool   `json:"dsm_supported"`
	Version        string `json:"version"`

	ns *Namespace
}

// LBAFormatJSON is one LBA format as nvme-cli prints it.
type LBAFormatJSON struct {
	MS uint16 `json:"ms"`
	DS uint8  `json:"ds"`
	RP uint8  `json:"rp"`
}

// IdentityOf lays out what Probe found.
func IdentityOf(ns *Namespace) Identity {
	c, n := ns.Ctrl, ns.Data
	j := Identity{
		VID: c.VID, SSVID: c.SSVID, SN: c.SerialNumber, MN: c.ModelNumber, FR: c.Firmware,
		RAB: c.RAB, IEEE: uint32(c.IEEE[0]) | uint32(c.IEEE[1])<<8 | uint32(c.IEEE[2])<<16,
		CMIC: c.CMIC, MDTS: c.MDTS, CNTLID: c.CNTLID, VER: c.VER, OAES: c.OAES, CTRATT: c.CTRATT,
		OACS: c.OACS, LPA: c.LPA, ENDGIDMAX: c.EndGIDMax, SQES: c.SQES, CQES: c.CQES,
		MAXCMD: c.MAXCMD, NN: c.NN, ONCS: c.ONCS, VWC: c.VWC, SGLS: c.SGLS, SubNQN: c.SubNQN,
		NSID: ns.NSID, NSZE: n.NSZE, NCAP: n.NCAP, NUSE: n.NUSE, NSFEAT: n.NSFEAT, NLBAF: n.NLBAF,
		FLBAS: n.FLBAS, DPS: n.DPS, ENDGID: n.EndGID,
		NGUID: hex.EncodeToString(n.NGUID[:]), EUI64: hex.EncodeToString(n.EUI64[:]),
		LBADS: ns.Format.LBADS, MS: ns.Format.MS, BlockSize: ns.BlockSize, CapacityBytes: ns.Capacity,
		MaxTransfer: ns.MaxTransfer, EnduranceGroup: ns.EnduranceGroup,
		FDPSupported: c.FDPSupported(), DSMSupported: c.DSMSupported(), Version: c.Version(),
		ns: ns,
	}
	for i := 0; i <= int(n.NLBAF) && i < len(n.LBAF); i++ {
		f := n.LBAF[i]
		j.LBAFs = append(j.LBAFs, LBAFormatJSON{MS: f.MS, DS: f.LBADS, RP: f.RP})
	}
	return j
}

// Rows is the summary a person reads, as {field, value} rows.
func (j *Identity) Rows() [][]string {
	yn := map[bool]string{true: "yes", false: "no"}
	mdts := "no limit"
	if j.MDTS != 0 && j.ns != nil {
		mdts = fmt.Sprintf("%d: %d KiB with 4 KiB pages", j.MDTS, j.ns.Ctrl.MaxTransfer(0)>>10)
	}
	var egs, vwc bool
	fmtIdx := 0
	if j.ns != nil {
		egs, vwc, fmtIdx = j.ns.Ctrl.EnduranceGroups(), j.ns.Ctrl.VolatileWriteCache(), j.ns.Data.FormatIndex()
	}
	rows := [][]string{
		{"model (mn)", j.MN},
		{"serial (sn)", j.SN},
		{"firmware (fr)", j.FR},
		{"vendor / subsystem vendor", fmt.Sprintf("%#04x / %#04x", j.VID, j.SSVID)},
		{"NVMe version", j.Version},
		{"controller id", fmt.Sprint(j.CNTLID)},
		{"subsystem NQN", j.SubNQN},
		{"ctratt", fmt.Sprintf("%#x (FDP %s, endurance groups %s)", j.CTRATT, yn[j.FDPSupported], yn[egs])},
		{"oncs", fmt.Sprintf("%#x (dataset management %s, write zeroes %s)", j.ONCS, yn[j.DSMSupported], yn[j.ONCS&ONCSWriteZeroes != 0])},
		{"oacs", fmt.Sprintf("%#x", j.OACS)},
		{"volatile write cache", yn[vwc]},
		{"mdts", mdts},
		{"max transfer used", SizeText(int64(j.MaxTransfer))},
		{"namespaces (nn)", fmt.Sprint(j.NN)},
		{"namespace id", fmt.Sprint(j.NSID)},
		{"size (nsze)", fmt.Sprintf("%d blocks = %s", j.NSZE, SizeText(j.CapacityBytes))},
		{"capacity / used (ncap / nuse)", fmt.Sprintf("%d / %d blocks", j.NCAP, j.NUSE)},
		{"LBA format in use", fmt.Sprintf("%d of %d: %d-byte blocks (lbads %d), %d bytes metadata", fmtIdx, int(j.NLBAF)+1, j.BlockSize, j.LBADS, j.MS)},
		{"endurance group", fmt.Sprint(j.EnduranceGroup)},
	}
	if j.NGUID != strings.Repeat("0", 32) {
		rows = append(rows, []string{"nguid", j.NGUID})
	}
	if j.EUI64 != strings.Repeat("0", 16) {
		rows = append(rows, []string{"eui64", j.EUI64})
	}
	return rows
}

// SizeText is n bytes for a person: "256.00 MiB (268435456 bytes)", or "512 B".
func SizeText(n int64) string {
	if n < 1024 {
		return units.FormatSizePrec(n, 2)
	}
	return fmt.Sprintf("%s (%d bytes)", units.FormatSizePrec(n, 2), n)
}

// TransportName names a transport for output: "io_uring URING_CMD", "ioctl", or its type.
func TransportName(t Transport) string {
	switch t.(type) {
	case *IoctlTransport:
		return "ioctl"
	case *UringCmdTransport:
		return "io_uring URING_CMD"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", t), "*")
}
