package emu

import (
	"time"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// dataOut checks that the host gave a buffer for n bytes from the controller.
func dataOut(cmd *nvme.Command, n int) ([]byte, bool) {
	if len(cmd.Data) < n {
		return nil, false
	}
	return cmd.Data[:n], true
}

func (c *Controller) identify(cmd *nvme.Command) nvme.Completion {
	buf, ok := dataOut(cmd, nvme.IdentifyDataLen)
	if !ok {
		return fail(stInvalidField)
	}
	clear(buf)
	cns := uint8(cmd.CDW10)
	switch cns {
	case nvme.CNSController:
		id := nvme.ControllerData{
			VID: 0x1b36, SSVID: 0x1af4, // QEMU's PCI ids: this is an emulated device
			SerialNumber: c.serial, ModelNumber: ModelNumber, Firmware: Firmware,
			MDTS: MDTS, CNTLID: 1, VER: 0x00020000,
			CTRATT: nvme.CTRATTFDPS | nvme.CTRATTEnduranceGroups,
			LPA:    1 << 2, // extended data for Get Log Page (offsets, NUMDU)
			ELPE:   0, EndGIDMax: EndGID, SQES: 0x66, CQES: 0x44, NN: 1,
			ONCS: nvme.ONCSDSM, VWC: 1,
			SubNQN: "nqn.2026-11.io.rbctl:emu:" + c.serial,
		}
		id.TNVMCAP[0] = uint64(c.spec.Size)
		_ = id.Encode(buf)
	case nvme.CNSNamespace:
		if cmd.NSID != NSID {
			return fail(stInvalidNS)
		}
		ns := nvme.NamespaceData{
			NSZE: c.nlb, NCAP: c.nlb, NUSE: c.nlb,
			NLBAF: 0, FLBAS: 0, EndGID: EndGID,
			NOIOB: 0, NPWG: uint16(c.spec.MappingUnit>>c.lbaShift) - 1,
		}
		ns.LBAF[0] = nvme.LBAFormat{LBADS: uint8(c.lbaShift)}
		_ = ns.Encode(buf)
		buf[33] = 1 // DLFEAT: deallocated blocks read as zeroes
	case nvme.CNSIndependentNamespace:
		if cmd.NSID != NSID {
			return fail(stInvalidNS)
		}
		ind := nvme.IndependentNamespaceData{EndGID: EndGID, NSTAT: 1}
		_ = ind.Encode(buf)
	case nvme.CNSActiveNamespaces:
		if cmd.NSID < NSID {
			_ = nvme.EncodeNamespaceList(buf, []uint32{NSID})
		}
	case nvme.CNSNSDescriptors:
		if cmd.NSID != NSID {
			return fail(stInvalidNS)
		}
		// An empty descriptor list.
	default:
		return fail(stInvalidField)
	}
	return nvme.Completion{}
}

// configLogLocked is the FDP Configurations log: one configuration, the one the spec made.
func (c *Controller) configLog() *fdp.ConfigLog {
	return &fdp.ConfigLog{Configs: []fdp.Config{{
		FDPA:    fdp.FDPAValid | c.rgif,
		NRG:     uint32(c.spec.RGs),
		NRUH:    uint16(c.spec.RUHs),
		MaxPIDs: uint16(c.spec.RUHs*c.spec.RGs - 1),
		NNSS:    1,
		RUNS:    uint64(c.spec.RUSize),
		RUHs:    c.ruhts,
	}}}
}

func (c *Controller) getLogPage(cmd *nvme.Command) nvme.Completion {
	p, n := nvme.ParseGetLogPage(cmd)
	buf, ok := dataOut(cmd, n)
	if !ok {
		return fail(stInvalidField)
	}
	var log []byte
	switch p.LID {
	case nvme.LogFDPConfigs, nvme.LogRUHUsage, nvme.LogFDPStats, nvme.LogFDPEvents:
		if p.LSI != EndGID || p.OT {
			return fail(stInvalidField)
		}
		c.mu.Lock()
		switch p.LID {
		case nvme.LogFDPConfigs:
			log, _ = c.configLog().Encode()
		case nvme.LogRUHUsage:
			u := &fdp.UsageLog{Attrs: make([]fdp.RUHAttr, c.spec.RUHs)}
			for i := range u.Attrs {
				u.Attrs[i] = fdp.RUHHostSpecified
			}
			if !c.feat.Enabled {
				for i := range u.Attrs {
					u.Attrs[i] = fdp.RUHUnused
				}
				u.Attrs[0] = fdp.RUHControllerSpecified
			}
			log, _ = u.Encode()
		case nvme.LogFDPStats:
			s := c.statsLocked()
			log = s.Encode()
		case nvme.LogFDPEvents:
			l := &fdp.EventsLog{Events: c.ctrl}
			if p.LSP&1 != 0 {
				l.Events = c.host
			}
			log = l.Encode()
		}
		c.mu.Unlock()
	case nvme.LogSMART:
		if p.NSID != 0 && p.NSID != NSID && p.NSID != nvme.NSIDAll {
			return fail(stInvalidNS)
		}
		log = c.smartLog()
	default:
		return fail(stInvalidLogPage)
	}
	if p.Offset > uint64(len(log)) {
		return fail(stInvalidField)
	}
	clear(buf)
	copy(buf, log[p.Offset:])
	return nvme.Completion{}
}

// Get Features SEL=3 capability bits.
const (
	capSaveable     = 1 << 0
	capNSSpecific   = 1 << 1
	capChangeable   = 1 << 2
	selSupportedCap = 3
)

func (c *Controller) getFeatures(cmd *nvme.Command) nvme.Completion {
	fid, sel := nvme.FeatureID(cmd.CDW10), uint8(cmd.CDW10>>8)&7
	switch fid {
	case nvme.FeatFDP:
		if uint16(cmd.CDW11) != EndGID {
			return fail(stInvalidField)
		}
		if sel == selSupportedCap {
			return nvme.Completion{Result: capSaveable | capChangeable}
		}
		c.mu.Lock()
		f := c.feat
		c.mu.Unlock()
		if sel == nvme.SelDefault {
			f = fdp.FeatureState{Enabled: true}
		}
		return nvme.Completion{Result: uint64(f.Value())}
	case nvme.FeatFDPEvents:
		if cmd.NSID != NSID {
			return fail(stInvalidNS)
		}
		if sel == selSupportedCap {
			return nvme.Completion{Result: capSaveable | capNSSpecific | capChangeable}
		}
		ph, noet := fdp.SplitEventsFeatureCDW11(cmd.CDW11)
		if int(ph) >= c.spec.RUHs {
			return fail(stInvalidField)
		}
		n := min(int(noet), len(supportedEvents))
		buf, ok := dataOut(cmd, 2*n)
		if !ok {
			return fail(stInvalidField)
		}
		ev := make([]fdp.EventEnable, n)
		c.mu.Lock()
		for i := range ev {
			ev[i] = fdp.EventEnable{Type: supportedEvents[i], Enabled: c.enables[ph][i] || sel == nvme.SelDefault}
		}
		c.mu.Unlock()
		copy(buf, fdp.EncodeEventEnables(ev))
		return nvme.Completion{Result: uint64(n)}
	case nvme.FeatVolatileWC:
		return nvme.Completion{Result: 1}
	}
	return fail(stInvalidField)
}

func (c *Controller) setFeatures(cmd *nvme.Command) nvme.Completion {
	fid := nvme.FeatureID(cmd.CDW10)
	switch fid {
	case nvme.FeatFDP:
		if uint16(cmd.CDW11) != EndGID {
			return fail(stInvalidField)
		}
		f := fdp.DecodeFeature(cmd.CDW12)
		if f.ConfigIndex != 0 {
			return fail(stInvalidField) // one configuration
		}
		c.mu.Lock()
		c.feat = f
		c.mu.Unlock()
		if err := c.save(); err != nil {
			return nvme.Completion{Status: stInternal, Err: err}
		}
		return nvme.Completion{}
	case nvme.FeatFDPEvents:
		if cmd.NSID != NSID {
			return fail(stInvalidNS)
		}
		ph, noet := fdp.SplitEventsFeatureCDW11(cmd.CDW11)
		if int(ph) >= c.spec.RUHs {
			return fail(stInvalidField)
		}
		types, err := fdp.DecodeEventTypes(cmd.Data, int(noet))
		if err != nil {
			return fail(stInvalidField)
		}
		idx := make([]int, len(types))
		for i, t := range types {
			idx[i] = -1
			for j, s := range supportedEvents {
				if s == t {
					idx[i] = j
				}
			}
			if idx[i] < 0 {
				return fail(stInvalidField) // unsupported event type
			}
		}
		enable := cmd.CDW12&1 != 0
		c.mu.Lock()
		for _, j := range idx {
			c.enables[ph][j] = enable
		}
		c.mu.Unlock()
		if err := c.save(); err != nil {
			return nvme.Completion{Status: stInternal, Err: err}
		}
		return nvme.Completion{}
	}
	return fail(stInvalidField)
}

// SMART / Health Information log (LID 0x02), 512 bytes. Offsets from the NVMe base spec.
const (
	smartSize       = 512
	smartTempOff    = 1  // u16 composite temperature, kelvin
	smartSpareOff   = 3  // u8 available spare %
	smartSpareThOff = 4  // u8 available spare threshold %
	smartUnitsRead  = 32 // u128 data units read (1000 × 512 bytes)
	smartUnitsWrite = 48 // u128 data units written
	smartReadCmds   = 64 // u128 host read commands
	smartWriteCmds  = 80 // u128 host write commands
	smartPowerOnHrs = 128
)

// smartLog reports this process's host activity (data units round up, as the spec says);
// temperature and spare are fixed, there are no media errors.
func (c *Controller) smartLog() []byte {
	b := make([]byte, smartSize)
	le.PutUint16(b[smartTempOff:], 313) // 40 °C
	b[smartSpareOff], b[smartSpareThOff] = 100, 10
	units := func(n uint64) uint64 { return (n + 512000 - 1) / 512000 }
	fdp.U128(units(c.readBytes.Load())).Put(b[smartUnitsRead:])
	fdp.U128(units(c.writeBytes.Load())).Put(b[smartUnitsWrite:])
	fdp.U128(c.readCmds.Load()).Put(b[smartReadCmds:])
	fdp.U128(c.writeCmds.Load()).Put(b[smartWriteCmds:])
	fdp.U128(uint64(time.Since(c.opened).Hours())).Put(b[smartPowerOnHrs:])
	return b
}
