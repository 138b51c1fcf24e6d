package nvmetcp

import (
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// Data lengths are decided by the command, not by the host's descriptor: before any R2T is
// sent or reply buffer taken, checkData refuses a length the command cannot use, and
// replyLen sizes a reply by what the command returns.

// Fixed sizes of what commands return (NVMe base specification).
const (
	smartLogLen    = 512
	errorEntryLen  = 64
	changedNSLen   = 4096
	effectsLogLen  = 4096
	dsmMaxDataLen  = 256 * nvme.DSMRangeLen
	featureDataCap = 4096 // the largest Get/Set Features data structure (LBA Range Type, HMB)
)

// checkData vets the data length n of a command that moves data, before any of it moves: refused reports that r is the command's completion.
//   - before Connect only a Connect may carry data (Command Sequence Error);
//   - write data above MDTS: Invalid Field in Command (the spec's status for a transfer
//     over MDTS; a reply is checked the same way once replyLen has sized it);
//   - Connect data is 1024 bytes (Connect Invalid Parameters naming the SGL length);
//   - a Read or Write must move exactly NLB blocks, I/O Management Receive at least its
//     NUMD, Get Log Page at least its NUMD (Data SGL Length Invalid otherwise); Dataset
//     Management at most 256 ranges.
func (q *queue) checkData(sqe *SQE, n uint32) (r result, refused bool) {
	refuse := func(r result) (result, bool) {
		q.t.counts.rejected.Add(1)
		return r, true
	}
	if sqe.Opcode == opFabrics {
		switch sqe.Raw[sqeFCType] {
		case FCTypeConnect:
			if n != ConnectDataLen {
				return refuse(invalidParam(false, sqeDPTR+sglLenOff))
			}
			return result{}, false
		case FCTypePropertyGet, FCTypePropertySet, FCTypeDisconnect:
			return refuse(status(StInvalidField)) // they carry no data
		}
		return refuse(status(StInvalidOpcode))
	}
	if q.ctrl == nil {
		return refuse(status(StSeqError))
	}
	if nvme.Direction(sqe.Opcode&3) == nvme.DirHostToCtrl && n > q.t.maxData {
		return refuse(status(StInvalidField)) // a reply's size is checked by reply: replyLen
	}
	if q.qid == 0 {
		if sqe.Opcode == nvme.OpGetLogPage {
			cmd := sqe.Command(nil)
			if _, want := nvme.ParseGetLogPage(&cmd); uint64(n) < uint64(want) {
				return refuse(status(StSGLLength))
			}
		}
		return result{}, false
	}
	switch sqe.Opcode {
	case nvme.OpRead, nvme.OpWrite:
		if bs, known := q.t.lbaSize[sqe.NSID]; known && uint64(n) != uint64(sqe.CDW[2]&0xffff+1)*uint64(bs) {
			return refuse(status(StSGLLength))
		}
	case nvme.OpIOMgmtRecv:
		if uint64(n) < (uint64(sqe.CDW[1])+1)*4 {
			return refuse(status(StSGLLength))
		}
	case nvme.OpDatasetManagement:
		if n > dsmMaxDataLen {
			return refuse(status(StSGLLength))
		}
	}
	return result{}, false
}

// replyLen is the buffer a command that returns data (n bytes allowed by the host, checked
// by checkData) gets: Identify 4096 bytes whatever the descriptor says; Get Log Page the
// log's real size from the offset, at most NUMD (the command sent to the backend is cut to
// it); Get Features the feature's data; Read its blocks; I/O Management Receive its NUMD.
func (q *queue) replyLen(sqe *SQE, n uint32) uint32 {
	if q.qid == 0 {
		switch sqe.Opcode {
		case nvme.OpIdentify:
			return nvme.IdentifyDataLen
		case nvme.OpGetLogPage:
			return q.logReplyLen(sqe, n)
		case nvme.OpGetFeatures:
			if nvme.FeatureID(sqe.CDW[0]) == nvme.FeatFDPEvents {
				_, noet := fdp.SplitEventsFeatureCDW11(sqe.CDW[1])
				return min(n, 2*uint32(noet))
			}
			return min(n, featureDataCap)
		}
		return n
	}
	switch sqe.Opcode {
	case nvme.OpRead:
		if bs, known := q.t.lbaSize[sqe.NSID]; known {
			return (sqe.CDW[2]&0xffff + 1) * bs
		}
	case nvme.OpIOMgmtRecv:
		return (sqe.CDW[1] + 1) * 4
	}
	return n
}

// logReplyLen sizes a Get Log Page reply and rewrites its NUMD (in sqe) to match.
func (q *queue) logReplyLen(sqe *SQE, n uint32) uint32 {
	cmd := sqe.Command(nil)
	p, want := nvme.ParseGetLogPage(&cmd)
	size := q.logSize(p)
	if size <= 0 || p.OT {
		return uint32(want)
	}
	l := uint64(4)
	if p.Offset < uint64(size) {
		l = min(uint64(want), (uint64(size)-p.Offset+3)&^3)
	}
	numd := uint32(l/4 - 1)
	sqe.CDW[0] = sqe.CDW[0]&0xffff | numd<<16
	sqe.CDW[1] = sqe.CDW[1]&0xffff0000 | numd>>16
	return uint32(l)
}

// logSize is the size of log page p, or 0 when the target does not know it (the backend's
// own logs then get the host's NUMD, still at most MDTS). The FDP configurations and usage
// logs say their size in a header, read from the backend first.
func (q *queue) logSize(p nvme.LogPage) int {
	if own := q.ownLog(p.LID); own != nil {
		return len(own)
	}
	switch p.LID {
	case nvme.LogSMART:
		return smartLogLen
	case nvme.LogFDPStats:
		return fdp.StatsLogSize
	case nvme.LogFDPEvents:
		return fdp.EventsLogSize
	case nvme.LogFDPConfigs:
		if hdr := q.backendLogHead(p, 16); hdr != nil {
			if n, err := fdp.ConfigLogSize(hdr); err == nil {
				return n
			}
		}
	case nvme.LogRUHUsage:
		if hdr := q.backendLogHead(p, 8); hdr != nil {
			if n, err := fdp.UsageLogNRUH(hdr); err == nil {
				return fdp.UsageLogSize(n)
			}
		}
	}
	return 0
}

// backendLogHead reads the first n bytes of log p from the backend (nil on any failure).
func (q *queue) backendLogHead(p nvme.LogPage, n int) []byte {
	p.Offset, p.RAE = 0, true
	buf := make([]byte, n)
	cmd, err := nvme.GetLogPage(p, buf)
	if err != nil {
		return nil
	}
	cmd.BufIndex = -1
	if c := q.t.cfg.Backend.Admin(&cmd); c.Err != nil || !c.Status.OK() {
		return nil
	}
	return buf
}
