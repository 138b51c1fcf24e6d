package devices

import (
	"fmt"

	"github.com/rbctl/rbctl/nvme"
)

// The errors of nvme that callers of this package test, under this package's name (as os
// names io/fs's), so that a caller that opens devices here need not import nvme.
var (
	// ErrNotNVMe: the path is not an NVMe controller or namespace (nvme.ErrNotNVMe).
	ErrNotNVMe = nvme.ErrNotNVMe
	// ErrFDPDisabled: the endurance group has FDP but it is disabled (nvme.ErrFDPDisabled).
	ErrFDPDisabled = nvme.ErrFDPDisabled
)

// LogOptions choose a Get Log Page (ReadLog).
type LogOptions struct {
	Admin AdminOptions
	LID   uint8        // the log page identifier (Page.LID)
	Page  nvme.LogPage // LSP, LSI, offset, NSID, RAE
	Len   uint32       // bytes to read, a multiple of 4
}

// DefaultLogOptions: every namespace (nvme.NSIDAll, as nvme-cli get-log), 512 bytes.
func DefaultLogOptions() LogOptions {
	return LogOptions{Page: nvme.LogPage{NSID: nvme.NSIDAll}, Len: 512}
}

// ReadLog sends Get Log Page to path (OpenAdmin; logs over 64 KiB in pieces) and returns
// the bytes with the page they were read from.
func ReadLog(path string, o LogOptions) (nvme.LogDump, error) {
	o.Page.LID = nvme.LogID(o.LID)
	a, err := OpenAdmin(path, o.Admin)
	if err != nil {
		return nvme.LogDump{}, err
	}
	defer a.Close()
	b, err := nvme.GetLog(a.Transport, o.Page, int(o.Len))
	if err != nil {
		return nvme.LogDump{}, fmt.Errorf("%s: %w", path, err)
	}
	return nvme.LogDump{Page: o.Page, Data: b}, nil
}
