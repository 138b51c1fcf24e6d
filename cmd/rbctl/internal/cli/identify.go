package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/reports"
)

func init() { register(newIdentifyCmd) }

// openNVMe opens DEV for passthrough (or the emulated SSD for an emu: spec, read-only: it
// must exist, and other readers may have it open); its errors name DEV and say what to
// pass instead.
func openNVMe(dev, transport string, nsid uint32) (nvme.Transport, error) {
	if emu.IsSpec(dev) {
		return emu.OpenWith(dev, emu.OpenOptions{ReadOnly: true})
	}
	return nvme.Open(dev, nvme.OpenOptions{Transport: transport, NSID: nsid}) // errors name dev
}

// identifyJSON uses nvme-cli's field names (`nvme id-ctrl -o json`, `nvme id-ns -o json`)
// for the fields both print, flattened into one object, plus rbctl's derived values.
type identifyJSON struct {
	Device    string `json:"device"`
	Transport string `json:"transport,omitempty"`
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
	NSID   uint32     `json:"nsid"`
	NSZE   uint64     `json:"nsze"`
	NCAP   uint64     `json:"ncap"`
	NUSE   uint64     `json:"nuse"`
	NSFEAT uint8      `json:"nsfeat"`
	NLBAF  uint8      `json:"nlbaf"`
	FLBAS  uint8      `json:"flbas"`
	DPS    uint8      `json:"dps"`
	ENDGID uint16     `json:"endgid"`
	NGUID  string     `json:"nguid"`
	EUI64  string     `json:"eui64"`
	LBAFs  []lbafJSON `json:"lbafs"`
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
	// WriteStreams: the kernel's write streams on a block device (/dev/nvmeXnY) only.
	WriteStreams *writeStreamsJSON `json:"write_streams,omitempty"`
}

// writeStreamsJSON is what a block device offers for placement through the kernel (Linux
// 6.16 write streams: stream s = RUH status index s-1 on an NVMe FDP namespace).
type writeStreamsJSON struct {
	Max         int    `json:"max"`
	Granularity int64  `json:"granularity_bytes"`
	Note        string `json:"note,omitempty"` // why there are none
}

// writeStreamsOf reports dev's write streams when dev is a block device, else nil.
func writeStreamsOf(dev string) *writeStreamsJSON {
	if st, err := os.Stat(dev); err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	ws, err := blockdev.BlockWriteStreams(dev)
	j := &writeStreamsJSON{Max: ws.Max, Granularity: ws.Granularity}
	switch {
	case errors.Is(err, blockdev.ErrWriteStreamsKernel):
		j.Note = "not supported, needs Linux 6.16 (this kernel ignores write_stream)"
	case err != nil:
		j.Note = err.Error()
	case ws.Max == 0:
		j.Note = "none: the device offers no write streams (no FDP, or FDP with several reclaim groups)"
	}
	return j
}

// writeStreamsText is the one-line form of j.
func writeStreamsText(j *writeStreamsJSON) string {
	if j.Max == 0 {
		return j.Note
	}
	return fmt.Sprintf("%d (stream s = placement handle s-1; granularity %s); rbctl uses them with --io-engine uring", j.Max, bytesHuman(j.Granularity))
}

type lbafJSON struct {
	MS uint16 `json:"ms"`
	DS uint8  `json:"ds"`
	RP uint8  `json:"rp"`
}

func identifyOf(dev, transport string, ns *nvme.Namespace) identifyJSON {
	c, n := ns.Ctrl, ns.Data
	j := identifyJSON{
		Device: dev, Transport: transport,
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
	}
	for i := 0; i <= int(n.NLBAF) && i < len(n.LBAF); i++ {
		f := n.LBAF[i]
		j.LBAFs = append(j.LBAFs, lbafJSON{MS: f.MS, DS: f.LBADS, RP: f.RP})
	}
	return j
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func bytesHuman(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.2f %s (%d bytes)", f, units[i], n)
}

func printIdentify(w io.Writer, j identifyJSON, ns *nvme.Namespace) error {
	t := reports.NewTable(w)
	t.Header("field", "value")
	row := func(k, v string) { t.Append(k, v) }
	row("device", j.Device)
	row("model (mn)", j.MN)
	row("serial (sn)", j.SN)
	row("firmware (fr)", j.FR)
	row("vendor / subsystem vendor", fmt.Sprintf("%#04x / %#04x", j.VID, j.SSVID))
	row("NVMe version", j.Version)
	row("controller id", fmt.Sprint(j.CNTLID))
	row("subsystem NQN", j.SubNQN)
	row("ctratt", fmt.Sprintf("%#x (FDP %s, endurance groups %s)", j.CTRATT, yesNo(j.FDPSupported), yesNo(ns.Ctrl.EnduranceGroups())))
	row("oncs", fmt.Sprintf("%#x (dataset management %s, write zeroes %s)", j.ONCS, yesNo(j.DSMSupported), yesNo(j.ONCS&nvme.ONCSWriteZeroes != 0)))
	row("oacs", fmt.Sprintf("%#x", j.OACS))
	row("volatile write cache", yesNo(ns.Ctrl.VolatileWriteCache()))
	mdts := "no limit"
	if j.MDTS != 0 {
		mdts = fmt.Sprintf("%d: %d KiB with 4 KiB pages", j.MDTS, ns.Ctrl.MaxTransfer(0)>>10)
	}
	row("mdts", mdts)
	row("max transfer used", bytesHuman(int64(j.MaxTransfer)))
	row("namespaces (nn)", fmt.Sprint(j.NN))
	row("namespace id", fmt.Sprint(j.NSID))
	row("size (nsze)", fmt.Sprintf("%d blocks = %s", j.NSZE, bytesHuman(j.CapacityBytes)))
	row("capacity / used (ncap / nuse)", fmt.Sprintf("%d / %d blocks", j.NCAP, j.NUSE))
	row("LBA format in use", fmt.Sprintf("%d of %d: %d-byte blocks (lbads %d), %d bytes metadata", ns.Data.FormatIndex(), int(j.NLBAF)+1, j.BlockSize, j.LBADS, j.MS))
	row("endurance group", fmt.Sprint(j.EnduranceGroup))
	if j.NGUID != strings.Repeat("0", 32) {
		row("nguid", j.NGUID)
	}
	if j.EUI64 != strings.Repeat("0", 16) {
		row("eui64", j.EUI64)
	}
	if j.Transport != "" {
		row("transport", j.Transport)
	}
	if j.WriteStreams != nil {
		row("write streams", writeStreamsText(j.WriteStreams))
	}
	return t.Render()
}

func transportName(t nvme.Transport) string {
	switch t.(type) {
	case *nvme.IoctlTransport:
		return "ioctl"
	case *nvme.UringCmdTransport:
		return "io_uring URING_CMD"
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T", t), "*")
	}
}

func newIdentifyCmd() *cobra.Command {
	var asJSON bool
	var transport string
	var nsid uint32
	cmd := &cobra.Command{
		Use:   "identify DEV",
		Short: "Identify an NVMe controller and namespace (model, serial, capabilities, size, LBA format)",
		Long: "identify sends Identify Controller and Identify Namespace to DEV (/dev/ngXnY,\n" +
			"/dev/nvmeXnY, /dev/nvmeX, or an emu: spec) and prints a summary. --json uses nvme-cli's\n" +
			"field names (sn, mn, fr, ctratt, oncs, nsze, ncap, nuse, flbas, lbafs, ...) plus derived\n" +
			"values (lbads, block_size, capacity_bytes, max_transfer_bytes). Needs root for devices.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev := args[0]
			t, err := openNVMe(dev, transport, nsid)
			if err != nil {
				return err
			}
			defer t.Close()
			ns, err := nvme.Probe(t)
			if err != nil {
				return fmt.Errorf("%s: %w", dev, err)
			}
			j := identifyOf(dev, transportName(t), ns)
			j.WriteStreams = writeStreamsOf(dev)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(j)
			}
			return printIdentify(cmd.OutOrStdout(), j, ns)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON with nvme-cli field names")
	cmd.Flags().StringVar(&transport, "transport", "", "passthrough transport: uring or ioctl (default: uring when available)")
	cmd.Flags().Uint32Var(&nsid, "nsid", 0, "namespace to identify when DEV is a controller (/dev/nvmeX); default: the first active one")
	return cmd
}
