package fdp

import (
	"encoding/binary"
	"fmt"
)

// FDP Configurations log (LID 0x20) layout. Wire format: do not change.
const (
	cfgLogHdrSize = 16
	cfgLogNOff    = 0 // u16 NUMFDPC, 0's based
	cfgLogVerOff  = 2 // u8 version
	cfgLogSizeOff = 4 // u32 total log size in bytes

	cfgDescFixed   = 64
	cfgDescSizeOff = 0  // u16 descriptor size
	cfgDescFDPAOff = 2  // u8 FDPA: [3:0] RGIF, [4] FDPVWC, [7] valid
	cfgDescVSSOff  = 3  // u8 vendor specific size (bytes after the RUH list)
	cfgDescNRGOff  = 4  // u32 number of reclaim groups
	cfgDescNRUHOff = 8  // u16 number of reclaim unit handles
	cfgDescMaxPIDs = 10 // u16 max placement identifiers (0's based)
	cfgDescNNSSOff = 12 // u32 number of namespaces supported
	cfgDescRUNSOff = 16 // u64 reclaim unit nominal size in bytes
	cfgDescERUTL   = 24 // u32 estimated reclaim unit time limit (seconds)
	ruhDescSize    = 4  // {u8 RUHT; u8 rsvd[3]}
)

// FDPA bits.
const (
	FDPARGIFMask uint8 = 0x0f
	FDPAVWC      uint8 = 1 << 4 // volatile write cache
	FDPAValid    uint8 = 1 << 7
)

// RUHType is a reclaim unit handle's isolation type.
type RUHType uint8

const (
	RUHInitiallyIsolated    RUHType = 1
	RUHPersistentlyIsolated RUHType = 2
)

func (t RUHType) String() string {
	switch t {
	case RUHInitiallyIsolated:
		return "Initially Isolated"
	case RUHPersistentlyIsolated:
		return "Persistently Isolated"
	}
	return fmt.Sprintf("Reserved (%d)", uint8(t))
}

// Config is one FDP configuration descriptor.
type Config struct {
	FDPA    uint8  // attributes: RGIF, VWC, valid
	VSS     uint8  // vendor specific size
	NRG     uint32 // reclaim groups
	NRUH    uint16 // reclaim unit handles
	MaxPIDs uint16 // maximum placement identifiers, 0's based
	NNSS    uint32 // namespaces supported
	RUNS    uint64 // reclaim unit nominal size, bytes
	ERUTL   uint32 // estimated reclaim unit time limit, seconds (0: none)
	RUHs    []RUHType
	Vendor  []byte // VSS vendor-specific bytes after the RUH list
}

// RGIF is the reclaim group identifier format: PID bits taken by the reclaim group.
func (c *Config) RGIF() uint8 { return c.FDPA & FDPARGIFMask }

// Valid reports the configuration's valid bit.
func (c *Config) Valid() bool { return c.FDPA&FDPAValid != 0 }

// size is the encoded descriptor size.
func (c *Config) size() int { return cfgDescFixed + ruhDescSize*int(c.NRUH) + int(c.VSS) }

// ConfigLog is the FDP Configurations log page.
type ConfigLog struct {
	Version uint8
	Configs []Config
}

// Encode lays the log out as a device returns it.
func (l *ConfigLog) Encode() ([]byte, error) {
	if len(l.Configs) == 0 || len(l.Configs) > 1<<16 {
		return nil, fmt.Errorf("%w: %d configurations", ErrBadSize, len(l.Configs))
	}
	total := cfgLogHdrSize
	for i := range l.Configs {
		c := &l.Configs[i]
		if len(c.RUHs) != int(c.NRUH) || len(c.Vendor) != int(c.VSS) {
			return nil, fmt.Errorf("%w: config %d has NRUH %d with %d RUH types, VSS %d with %d bytes",
				ErrBadSize, i, c.NRUH, len(c.RUHs), c.VSS, len(c.Vendor))
		}
		if c.size() > 0xffff {
			return nil, fmt.Errorf("%w: config %d descriptor is %d bytes", ErrBadSize, i, c.size())
		}
		total += c.size()
	}
	b := make([]byte, total)
	binary.LittleEndian.PutUint16(b[cfgLogNOff:], uint16(len(l.Configs)-1))
	b[cfgLogVerOff] = l.Version
	binary.LittleEndian.PutUint32(b[cfgLogSizeOff:], uint32(total))
	off := cfgLogHdrSize
	for i := range l.Configs {
		c := &l.Configs[i]
		d := b[off : off+c.size()]
		binary.LittleEndian.PutUint16(d[cfgDescSizeOff:], uint16(c.size()))
		d[cfgDescFDPAOff] = c.FDPA
		d[cfgDescVSSOff] = c.VSS
		binary.LittleEndian.PutUint32(d[cfgDescNRGOff:], c.NRG)
		binary.LittleEndian.PutUint16(d[cfgDescNRUHOff:], c.NRUH)
		binary.LittleEndian.PutUint16(d[cfgDescMaxPIDs:], c.MaxPIDs)
		binary.LittleEndian.PutUint32(d[cfgDescNNSSOff:], c.NNSS)
		binary.LittleEndian.PutUint64(d[cfgDescRUNSOff:], c.RUNS)
		binary.LittleEndian.PutUint32(d[cfgDescERUTL:], c.ERUTL)
		for j, t := range c.RUHs {
			d[cfgDescFixed+ruhDescSize*j] = uint8(t)
		}
		copy(d[cfgDescFixed+ruhDescSize*len(c.RUHs):], c.Vendor)
		off += c.size()
	}
	return b, nil
}

// MaxConfigLogSize is the largest FDP Configurations log rbctl reads: sixteen descriptors of
// the largest size a descriptor's u16 size field allows. A log holds NUMFDPC+1 descriptors,
// so its header may claim up to 16 + 65536·65535 bytes (4 GiB); a device reporting more than
// this limit, or more than its own NUMFDPC allows, is refused before anything is read.
const MaxConfigLogSize = cfgLogHdrSize + 16*0xffff

// ConfigLogSize returns the total log size from the 16-byte header, so a caller can read
// the header first and then the whole log (as nvme-cli does). The size must hold one
// descriptor, fit the header's descriptor count (each at most 65535 bytes) and stay within
// MaxConfigLogSize.
func ConfigLogSize(hdr []byte) (int, error) {
	if len(hdr) < cfgLogHdrSize {
		return 0, fmt.Errorf("%w: configurations log header is %d bytes, need %d", ErrShort, len(hdr), cfgLogHdrSize)
	}
	n := int64(binary.LittleEndian.Uint32(hdr[cfgLogSizeOff:]))
	configs := int64(binary.LittleEndian.Uint16(hdr[cfgLogNOff:])) + 1
	if n < cfgLogHdrSize+cfgDescFixed {
		return 0, fmt.Errorf("%w: configurations log size %d is below one descriptor (%d)", ErrBadSize, n, cfgLogHdrSize+cfgDescFixed)
	}
	if most := cfgLogHdrSize + configs*0xffff; n > most {
		return 0, fmt.Errorf("%w: configurations log size %d above the %d bytes %d descriptors can take", ErrBadSize, n, most, configs)
	}
	if n > MaxConfigLogSize {
		return 0, fmt.Errorf("%w: configurations log size %d above the %d bytes rbctl reads", ErrBadSize, n, MaxConfigLogSize)
	}
	return int(n), nil
}

// DecodeConfigLog decodes an FDP Configurations log. b may be longer than the log.
func DecodeConfigLog(b []byte) (*ConfigLog, error) {
	size, err := ConfigLogSize(b)
	if err != nil {
		return nil, err
	}
	if len(b) < size {
		return nil, fmt.Errorf("%w: configurations log says %d bytes, have %d", ErrShort, size, len(b))
	}
	b = b[:size]
	n := int(binary.LittleEndian.Uint16(b[cfgLogNOff:])) + 1
	l := &ConfigLog{Version: b[cfgLogVerOff]}
	off := cfgLogHdrSize
	for i := 0; i < n; i++ {
		if off+cfgDescFixed > len(b) {
			return nil, fmt.Errorf("%w: configuration %d of %d starts at %d past the log end %d", ErrShort, i, n, off, len(b))
		}
		d := b[off:]
		dsz := int(binary.LittleEndian.Uint16(d[cfgDescSizeOff:]))
		c := Config{
			FDPA:    d[cfgDescFDPAOff],
			VSS:     d[cfgDescVSSOff],
			NRG:     binary.LittleEndian.Uint32(d[cfgDescNRGOff:]),
			NRUH:    binary.LittleEndian.Uint16(d[cfgDescNRUHOff:]),
			MaxPIDs: binary.LittleEndian.Uint16(d[cfgDescMaxPIDs:]),
			NNSS:    binary.LittleEndian.Uint32(d[cfgDescNNSSOff:]),
			RUNS:    binary.LittleEndian.Uint64(d[cfgDescRUNSOff:]),
			ERUTL:   binary.LittleEndian.Uint32(d[cfgDescERUTL:]),
		}
		if dsz < c.size() || off+dsz > len(b) {
			return nil, fmt.Errorf("%w: configuration %d descriptor size %d (needs %d for %d RUHs, %d vendor bytes; %d left)",
				ErrBadSize, i, dsz, c.size(), c.NRUH, c.VSS, len(b)-off)
		}
		c.RUHs = make([]RUHType, c.NRUH)
		for j := range c.RUHs {
			c.RUHs[j] = RUHType(d[cfgDescFixed+ruhDescSize*j])
		}
		vs := cfgDescFixed + ruhDescSize*int(c.NRUH)
		if c.VSS > 0 {
			c.Vendor = append([]byte(nil), d[vs:vs+int(c.VSS)]...)
		}
		l.Configs = append(l.Configs, c)
		off += dsz
	}
	return l, nil
}
