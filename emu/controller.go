// Package emu is an emulated NVMe SSD with Flexible Data Placement: an in-process
// controller that implements nvme.Transport and answers the commands rbctl sends a real
// drive — Identify, the four FDP log pages, the FDP and FDP Events features, I/O Management
// Receive/Send (RUH status and update), Read, Write with DTYPE=2/DSPEC=PID, Dataset
// Management deallocate and Flush — from the bytes of the commands alone. Data lives in a
// sparse file (or memory); every write and deallocate feeds an ftl.Model, so the FDP
// statistics (HBMW, MBMW, MBE) and RUH status are the model's output, not measurements.
// See docs/emulator.md.
package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/nvme"
)

// Identity and limits the controller reports.
const (
	ModelNumber = "rbctl emulated FDP SSD"
	Firmware    = "1.0"
	NSID        = 1 // the only namespace
	EndGID      = 1 // the only endurance group
	// MDTS 6 with 4 KiB pages: 256 KiB per command, as many real drives.
	MDTS        = 6
	maxTransfer = nvme.DefaultMinPageSize << MDTS
)

// Supported FDP event types (per placement handle, all enabled when the device is created).
var supportedEvents = []fdp.EventType{fdp.EventRUNotFullyWritten, fdp.EventInvalidPID}

// Controller is the emulated SSD. It is safe for concurrent use.
type Controller struct {
	spec     Spec
	store    store
	serial   string
	lbaShift uint
	nlb      uint64 // namespace size in logical blocks
	rgif     uint8
	ruhts    []fdp.RUHType

	// Host activity for the SMART / Health log (this process only).
	readBytes, writeBytes, readCmds, writeCmds atomic.Uint64
	opened                                     time.Time

	saveMu sync.Mutex // serialises writes of the state file

	mu      sync.Mutex // guards everything below
	model   *ftl.Model
	rebuilt ftl.Stats // model counters after the rebuild on open (not host activity)
	base    fdp.Stats // counters carried over from earlier processes
	feat    fdp.FeatureState
	enables [][]bool // [placement handle][supportedEvents index]
	host    []fdp.Event
	ctrl    []fdp.Event
	closed  bool
	now     func() time.Time

	// readOnly: the data file is open read-only under a shared lock (OpenOptions.ReadOnly);
	// exclusive is set once claimWrite converted that lock for a state change, lockLost when
	// a failed conversion could not take the shared lock back (every command then fails).
	readOnly            bool
	claimMu             sync.Mutex
	exclusive, lockLost atomic.Bool
	// dirty: something PATH.fdp records changed (or the device is new); only then is it saved.
	dirty atomic.Bool
}

// Open opens (creating if needed) the emulated SSD a spec string describes, for writing.
func Open(spec string) (*Controller, error) { return OpenWith(spec, OpenOptions{Create: true}) }

// OpenWith opens the emulated SSD a spec string describes as opt says.
func OpenWith(spec string, opt OpenOptions) (*Controller, error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return NewWith(sp, opt)
}

// New opens (creating if needed) the emulated SSD described by sp, for writing.
func New(sp Spec) (*Controller, error) { return NewWith(sp, OpenOptions{Create: true}) }

// NewWith opens the emulated SSD described by sp as opt says. For a file-backed device the
// data file is locked first (docs/reliability.md); the geometry and FDP state are kept next
// to the data in PATH.fdp, and reopening with other geometry fails.
func NewWith(sp Spec, opt OpenOptions) (*Controller, error) {
	if err := sp.validate(); err != nil {
		return nil, err
	}
	var (
		data    *dataFile
		saved   *savedState
		created bool
	)
	if sp.Path != "" {
		var err error
		if data, err = openDataFile(sp.Path, opt); err != nil {
			return nil, err
		}
		// Read the state only under the lock: its writer holds the lock exclusively.
		if saved, err = loadState(statePath(sp.Path)); err == nil && saved != nil {
			sp, err = saved.merge(sp)
		}
		if err != nil {
			data.abandon()
			return nil, err
		}
		created = data.size == 0
	}
	c := &Controller{spec: sp, now: time.Now, opened: time.Now(), readOnly: opt.ReadOnly}
	for c.lbaShift = 9; 1<<c.lbaShift < sp.LBASize; c.lbaShift++ {
	}
	c.nlb = uint64(sp.Size) >> c.lbaShift
	c.rgif = fdp.RGIFFor(uint32(sp.RGs))
	c.ruhts = make([]fdp.RUHType, sp.RUHs)
	for i := range c.ruhts {
		c.ruhts[i] = fdp.RUHType(sp.handleIsolation(i).RUHT())
	}
	h := fnv.New64a()
	h.Write([]byte(sp.String()))
	c.serial = fmt.Sprintf("EMU%016X", h.Sum64())

	model, err := newModel(sp)
	if err != nil {
		if data != nil {
			data.abandon()
		}
		return nil, err
	}
	c.model = model

	if sp.Path == "" {
		ms, err := newMemStore(sp.Size)
		if err != nil {
			return nil, err
		}
		c.store = ms
	} else {
		fs, err := data.store(sp.Size)
		if err != nil {
			return nil, err
		}
		c.store = fs
	}
	c.resetFeaturesLocked()
	if saved != nil {
		saved.apply(c)
		if sp.given["fdp"] && c.feat.Enabled != sp.FDP {
			c.feat.Enabled = sp.FDP
			c.dirty.Store(true)
		}
	}
	if created {
		c.dirty.Store(true) // a new device: its geometry goes to PATH.fdp
	} else if sp.Path != "" {
		// The FTL map is not persisted: rebuild it from the data file's allocated extents
		// (written once through handle 0) and report only what happens after that.
		var rerr error
		err := c.store.Extents(func(off, n int64) {
			if rerr == nil {
				rerr = c.model.WriteBytes(off, n, 0)
			}
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			c.store.Close()
			return nil, fmt.Errorf("emu: rebuild the FTL map from %s: %w", sp.Path, err)
		}
		c.model.DrainEvents()
	}
	c.rebuilt = c.model.Stats()
	return c, nil
}

// Spec returns the device's spec (with the parameters a saved state supplied).
func (c *Controller) Spec() Spec { return c.spec }

// NSID implements nvme.Transport: the emulated namespace is NSID 1.
func (c *Controller) NSID() uint32 { return NSID }

// Close implements nvme.Transport: it saves the FDP state and counters next to a file-backed
// device and closes the data file.
func (c *Controller) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.save()
	if serr := c.store.Sync(); err == nil {
		err = serr
	}
	if cerr := c.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// ModelStats returns the FTL model's counters since the device was opened (excluding the
// rebuild of an existing data file). For tests and reports; hosts read the statistics log.
func (c *Controller) ModelStats() ftl.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model.Stats().Sub(c.rebuilt)
}

// statsLocked is the statistics log content: carried-over counters plus the model's.
func (c *Controller) statsLocked() fdp.Stats {
	d := c.model.Stats().Sub(c.rebuilt)
	return fdp.Stats{
		HBMW: c.base.HBMW.Add(fdp.U128(d.HostBytes)),
		MBMW: c.base.MBMW.Add(fdp.U128(d.MediaBytes)),
		MBE:  c.base.MBE.Add(fdp.U128(d.ErasedBytes)),
	}
}

// NVMe status values the controller returns (Linux passthrough form: SC | SCT<<8 | DNR<<14).
const (
	dnr              nvme.Status = 1 << 14
	stInvalidOpcode              = 0x01 | dnr
	stInvalidField               = 0x02 | dnr
	stInternal       nvme.Status = 0x06
	stInvalidNS                  = 0x0B | dnr
	stWriteProtected             = 0x20 | dnr // Namespace is Write Protected (opened read-only)
	stFDPDisabled                = 0x29 | dnr
	stLBAOutOfRange              = 0x80 | dnr
	stCapacity                   = 0x81 | dnr
	stInvalidLogPage             = 0x109 | dnr
	stWriteFault     nvme.Status = 0x280 // media: the store refused the write
	stUnrecovered    nvme.Status = 0x281 // media: the store failed the read
)

func fail(s nvme.Status) nvme.Completion { return nvme.Completion{Status: s} }

var errClosed = errors.New("emu: device closed")

func (c *Controller) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed || c.lockLost.Load()
}

// Admin implements nvme.Transport.
func (c *Controller) Admin(cmd *nvme.Command) nvme.Completion {
	if c.isClosed() {
		return nvme.Completion{Err: errClosed}
	}
	switch cmd.Opcode {
	case nvme.OpIdentify:
		return c.identify(cmd)
	case nvme.OpGetLogPage:
		return c.getLogPage(cmd)
	case nvme.OpGetFeatures:
		return c.getFeatures(cmd)
	case nvme.OpSetFeatures:
		if err := c.claimWrite(); err != nil {
			return nvme.Completion{Err: err}
		}
		c.dirty.Store(true)
		return c.setFeatures(cmd)
	}
	return fail(stInvalidOpcode)
}

// IO implements nvme.Transport: commands run one after another in the caller's goroutine;
// concurrent callers proceed in parallel (the model is updated under a lock, data is copied
// outside it).
func (c *Controller) IO(cmds []nvme.Command, done []nvme.Completion) {
	for i := range cmds {
		if c.isClosed() {
			done[i] = nvme.Completion{Err: errClosed}
			continue
		}
		done[i] = c.io(&cmds[i])
	}
}

func (c *Controller) io(cmd *nvme.Command) nvme.Completion {
	if cmd.NSID != NSID {
		return fail(stInvalidNS)
	}
	switch cmd.Opcode {
	case nvme.OpRead:
		return c.read(cmd)
	case nvme.OpWrite:
		if c.readOnly {
			return fail(stWriteProtected)
		}
		c.dirty.Store(true)
		return c.write(cmd)
	case nvme.OpFlush:
		return c.flush()
	case nvme.OpDatasetManagement:
		if c.readOnly {
			return fail(stWriteProtected)
		}
		c.dirty.Store(true)
		return c.dsm(cmd)
	case nvme.OpIOMgmtRecv:
		return c.ioMgmtRecv(cmd)
	case nvme.OpIOMgmtSend:
		if err := c.claimWrite(); err != nil {
			return nvme.Completion{Err: err}
		}
		c.dirty.Store(true)
		return c.ioMgmtSend(cmd)
	}
	return fail(stInvalidOpcode)
}

// pidFor returns the (reclaim group, handle) a PID names, or ok=false.
func (c *Controller) pidFor(pid uint16) (rg, ph int, ok bool) {
	g, h := fdp.SplitPID(pid, c.rgif)
	if int(g) >= c.spec.RGs || int(h) >= c.spec.RUHs {
		return 0, 0, false
	}
	return int(g), int(h), true
}

// makePID is fdp.MakePID for a pair known to be valid.
func (c *Controller) makePID(rg, ph int) uint16 {
	p, _ := fdp.MakePID(uint16(rg), uint16(ph), c.rgif)
	return p
}

// logEventLocked records a host or controller FDP event if it is enabled for handle ph.
func (c *Controller) logEventLocked(e fdp.Event, ph int) {
	idx := -1
	for i, t := range supportedEvents {
		if t == e.Type {
			idx = i
		}
	}
	if idx < 0 || ph < 0 || ph >= len(c.enables) || !c.enables[ph][idx] {
		return
	}
	e.Timestamp = uint64(c.now().UnixMilli())
	if e.Type.HostEvent() {
		c.host = appendEvent(c.host, e)
	} else {
		c.ctrl = appendEvent(c.ctrl, e)
	}
}

func appendEvent(l []fdp.Event, e fdp.Event) []fdp.Event {
	l = append(l, e)
	if len(l) > fdp.MaxEvents {
		l = append(l[:0], l[len(l)-fdp.MaxEvents:]...)
	}
	return l
}

// drainModelEventsLocked turns the FTL's events into FDP events.
func (c *Controller) drainModelEventsLocked() {
	for _, e := range c.model.DrainEvents() {
		switch e.Type {
		case ftl.EventRUNotFullyWritten:
			c.logEventLocked(fdp.Event{
				Type:  fdp.EventRUNotFullyWritten,
				Flags: fdp.EventFlagPIV | fdp.EventFlagNSIDV | fdp.EventFlagLV,
				PID:   c.makePID(e.Group, e.Handle), NSID: NSID,
				RGID: uint16(e.Group), RUHID: uint8(e.Handle),
			}, e.Handle)
		case ftl.EventMediaReallocated:
			c.logEventLocked(fdp.Event{
				Type: fdp.EventMediaReallocated, Flags: fdp.EventFlagLV,
				RGID: uint16(e.Group), RUHID: uint8(e.Handle),
			}, e.Handle)
		}
	}
}

// le is shorthand for the wire byte order.
var le = binary.LittleEndian
