package emu

import (
	"errors"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/nvme"
)

// rwRange checks a Read/Write's range and buffer and returns the byte offset and length.
func (c *Controller) rwRange(cmd *nvme.Command, f nvme.RWFields) (off, n int64, st nvme.Status) {
	if f.SLBA >= c.nlb || uint64(f.NLB) > c.nlb-f.SLBA {
		return 0, 0, stLBAOutOfRange
	}
	n = int64(f.NLB) << c.lbaShift
	if n > maxTransfer || int64(len(cmd.Data)) < n {
		return 0, 0, stInvalidField
	}
	return int64(f.SLBA) << c.lbaShift, n, 0
}

func (c *Controller) read(cmd *nvme.Command) nvme.Completion {
	f := nvme.ParseRW(cmd)
	off, n, st := c.rwRange(cmd, f)
	if st != 0 {
		return fail(st)
	}
	if err := c.store.ReadAt(cmd.Data[:n], off); err != nil {
		return nvme.Completion{Status: stUnrecovered, Err: err}
	}
	c.readCmds.Add(1)
	c.readBytes.Add(uint64(n))
	return nvme.Completion{}
}

func (c *Controller) write(cmd *nvme.Command) nvme.Completion {
	f := nvme.ParseRW(cmd)
	off, n, st := c.rwRange(cmd, f)
	if st != 0 {
		return fail(st)
	}
	if f.DType != 0 && f.DType != nvme.DirTypeDataPlacement {
		return fail(stInvalidField) // only the data placement directive is supported
	}
	c.mu.Lock()
	var err error
	if c.feat.Enabled && f.DType == nvme.DirTypeDataPlacement {
		rg, ph, ok := c.pidFor(f.DSpec)
		if ok {
			err = c.model.WriteGroup(off/c.spec.MappingUnit, units(off, n, c.spec.MappingUnit), rg, ph)
		} else {
			// An invalid PID: the write goes to the default handle and an Invalid PID
			// event is logged (against the default handle's event enables).
			c.logEventLocked(fdp.Event{
				Type: fdp.EventInvalidPID, Flags: fdp.EventFlagPIV | fdp.EventFlagNSIDV,
				PID: f.DSpec, NSID: NSID,
			}, 0)
			err = c.model.WriteBytes(off, n, 0)
		}
	} else {
		// No directive, or FDP disabled (directives are then ignored): the default handle,
		// striped over reclaim groups by the model.
		err = c.model.WriteBytes(off, n, 0)
	}
	c.drainModelEventsLocked()
	c.mu.Unlock()
	if err != nil {
		if errors.Is(err, ftl.ErrInfeasible) {
			return nvme.Completion{Status: stCapacity, Err: err}
		}
		return nvme.Completion{Status: stInternal, Err: err}
	}
	if err := c.store.WriteAt(cmd.Data[:n], off); err != nil {
		return nvme.Completion{Status: stWriteFault, Err: err}
	}
	c.writeCmds.Add(1)
	c.writeBytes.Add(uint64(n))
	return nvme.Completion{}
}

// units is the number of mapping units [off, off+n) touches.
func units(off, n, mu int64) int64 { return (off+n+mu-1)/mu - off/mu }

func (c *Controller) flush() nvme.Completion {
	if err := c.store.Sync(); err != nil {
		return nvme.Completion{Status: stInternal, Err: err}
	}
	if err := c.save(); err != nil {
		return nvme.Completion{Status: stInternal, Err: err}
	}
	return nvme.Completion{}
}

func (c *Controller) dsm(cmd *nvme.Command) nvme.Completion {
	nr := int(cmd.CDW10&0xff) + 1
	ranges, err := nvme.DecodeDSMRanges(cmd.Data, nr)
	if err != nil {
		return fail(stInvalidField)
	}
	if cmd.CDW11&nvme.DSMDeallocate == 0 {
		return nvme.Completion{} // integral read/write hints only: nothing to do
	}
	for _, r := range ranges {
		if r.SLBA > c.nlb || uint64(r.NLB) > c.nlb-r.SLBA {
			return fail(stLBAOutOfRange)
		}
	}
	for _, r := range ranges {
		if r.NLB == 0 {
			continue
		}
		off, n := int64(r.SLBA)<<c.lbaShift, int64(r.NLB)<<c.lbaShift
		c.mu.Lock()
		c.model.DeallocateBytes(off, n)
		c.mu.Unlock()
		if err := c.store.Deallocate(off, n); err != nil {
			return nvme.Completion{Status: stInternal, Err: err}
		}
	}
	return nvme.Completion{}
}

// ruhStatusLocked lists every (reclaim group, placement handle) pair of the namespace.
func (c *Controller) ruhStatusLocked() *fdp.RUHStatus {
	s := &fdp.RUHStatus{}
	for rg := 0; rg < c.spec.RGs; rg++ {
		for ph := 0; ph < c.spec.RUHs; ph++ {
			st, _ := c.model.RUHStatus(rg, ph)
			s.Descs = append(s.Descs, fdp.RUHStatusDesc{
				PID:   c.makePID(rg, ph),
				RUHID: uint16(ph),
				RUAMW: uint64(st.RUAMWBytes) >> c.lbaShift,
			})
		}
	}
	return s
}

func (c *Controller) ioMgmtRecv(cmd *nvme.Command) nvme.Completion {
	if nvme.IOMgmtOp(cmd.CDW10) != nvme.IOMgmtRecvRUHStatus {
		return fail(stInvalidField)
	}
	n := (int(cmd.CDW11) + 1) * 4
	buf, ok := dataOut(cmd, n)
	if !ok {
		return fail(stInvalidField)
	}
	c.mu.Lock()
	if !c.feat.Enabled {
		c.mu.Unlock()
		return fail(stFDPDisabled)
	}
	b, _ := c.ruhStatusLocked().Encode()
	c.mu.Unlock()
	clear(buf)
	copy(buf, b)
	return nvme.Completion{}
}

func (c *Controller) ioMgmtSend(cmd *nvme.Command) nvme.Completion {
	if nvme.IOMgmtOp(cmd.CDW10) != nvme.IOMgmtSendRUHUpdate {
		return fail(stInvalidField)
	}
	u, err := fdp.DecodeRUHUpdate(cmd.CDW10, cmd.Data)
	if err != nil {
		return fail(stInvalidField)
	}
	type pair struct{ rg, ph int }
	pairs := make([]pair, len(u.PIDs))
	for i, pid := range u.PIDs {
		rg, ph, ok := c.pidFor(pid)
		if !ok {
			return fail(stInvalidField)
		}
		pairs[i] = pair{rg, ph}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.feat.Enabled {
		return fail(stFDPDisabled)
	}
	for _, p := range pairs {
		if err := c.model.UpdateRUHGroup(p.rg, p.ph); err != nil {
			return nvme.Completion{Status: stInternal, Err: err}
		}
	}
	c.drainModelEventsLocked()
	return nvme.Completion{}
}
