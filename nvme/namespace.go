package nvme

import (
	"errors"
	"fmt"
)

// ErrMetadataFormat: the namespace's LBA format carries metadata, which rbctl's passthrough
// data path does not transfer.
var ErrMetadataFormat = errors.New("nvme: LBA format with metadata is not supported")

// Namespace is what rbctl needs to know about the namespace a Transport addresses and the
// controller behind it, from Identify.
type Namespace struct {
	Ctrl   *ControllerData
	Data   *NamespaceData
	NSID   uint32
	Format LBAFormat // the LBA format in use

	BlockSize      int    // logical block size in bytes (2^LBADS)
	Blocks         uint64 // NSZE
	Capacity       int64  // NSZE * BlockSize
	EnduranceGroup uint16 // ENDGID from CNS 0 (or CNS 0x08 when CNS 0 reports 0)
	// MaxTransfer is the largest transfer of one command in bytes, from MDTS with the
	// controller's minimum page size assumed to be 4 KiB (CAP.MPSMIN is a register that
	// Linux passthrough does not expose; 4 KiB is the smallest page the spec allows, so the
	// estimate never exceeds the real limit) and capped by the transport's own limit
	// (the kernel's max_hw_sectors) when it reports one. 0 would mean unlimited; Probe
	// never returns 0 (it caps at 1 MiB when nothing limits it).
	MaxTransfer int
}

// TransferLimiter is implemented by transports with their own per-command size limit (the
// Linux driver's max_hw_sectors for passthrough). 0 means unknown.
type TransferLimiter interface {
	MaxTransferBytes() int
}

// DefaultMaxTransfer caps transfers when neither MDTS nor the transport limits them.
const DefaultMaxTransfer = 1 << 20

// Probe identifies the controller and the transport's namespace (t.NSID(); when that is 0,
// the first active namespace).
func Probe(t Transport) (*Namespace, error) {
	ctrl, err := ReadController(t)
	if err != nil {
		return nil, err
	}
	nsid := t.NSID()
	if nsid == 0 {
		ids, err := ReadActiveNamespaces(t)
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("nvme: controller %q has no active namespace", ctrl.ModelNumber)
		}
		nsid = ids[0]
	}
	nsd, err := ReadNamespace(t, nsid)
	if err != nil {
		return nil, err
	}
	if nsd.NSZE == 0 {
		return nil, fmt.Errorf("nvme: namespace %d reports size 0 (inactive or not attached)", nsid)
	}
	f, err := nsd.Format()
	if err != nil {
		return nil, fmt.Errorf("namespace %d: %w", nsid, err)
	}
	ns := &Namespace{
		Ctrl: ctrl, Data: nsd, NSID: nsid, Format: f,
		BlockSize:      f.DataSize(),
		Blocks:         nsd.NSZE,
		EnduranceGroup: nsd.EndGID,
	}
	if nsd.NSZE > uint64(1<<62)/uint64(ns.BlockSize) {
		return nil, fmt.Errorf("nvme: namespace %d size %d blocks overflows", nsid, nsd.NSZE)
	}
	ns.Capacity = int64(nsd.NSZE) * int64(ns.BlockSize)
	if ns.EnduranceGroup == 0 && ctrl.EnduranceGroups() {
		// Some controllers report ENDGID only in the command set independent structure.
		if ind, err := ReadIndependentNamespace(t, nsid); err == nil {
			ns.EnduranceGroup = ind.EndGID
		}
	}
	ns.MaxTransfer = ctrl.MaxTransfer(DefaultMinPageSize)
	if l, ok := t.(TransferLimiter); ok {
		if m := l.MaxTransferBytes(); m > 0 && (ns.MaxTransfer == 0 || m < ns.MaxTransfer) {
			ns.MaxTransfer = m
		}
	}
	if ns.MaxTransfer == 0 {
		ns.MaxTransfer = DefaultMaxTransfer
	}
	if ns.MaxTransfer < ns.BlockSize {
		ns.MaxTransfer = ns.BlockSize
	}
	return ns, nil
}

// HasMetadata reports whether the LBA format in use carries metadata.
func (n *Namespace) HasMetadata() bool { return n.Format.MS != 0 }

// CheckNoMetadata returns ErrMetadataFormat, with what to do, when the format carries metadata.
func (n *Namespace) CheckNoMetadata() error {
	if !n.HasMetadata() {
		return nil
	}
	alt := -1
	for i := 0; i <= int(n.Data.NLBAF) && i < len(n.Data.LBAF); i++ {
		if n.Data.LBAF[i].MS == 0 && n.Data.LBAF[i].DataSize() != 0 {
			alt = i
			break
		}
	}
	hint := "this namespace offers no LBA format without metadata"
	if alt >= 0 {
		hint = sprintf("reformat it to one without (nvme-cli's format with LBA format %d, which erases the namespace)", alt)
	}
	return fmt.Errorf("%w: namespace %d uses LBA format %d (%d-byte blocks with %d bytes of metadata); %s",
		ErrMetadataFormat, n.NSID, n.Data.FormatIndex(), n.BlockSize, n.Format.MS, hint)
}
