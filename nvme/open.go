package nvme

import (
	"fmt"
	"strings"
)

// Transport kinds for OpenOptions.Transport.
const (
	TransportAuto  = ""      // io_uring URING_CMD when available, else ioctl
	TransportUring = "uring" // io_uring URING_CMD only (fail if unavailable)
	TransportIoctl = "ioctl" // synchronous passthrough ioctls
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Transport selects the transport: TransportAuto (""), TransportUring or TransportIoctl.
	Transport string
	// QueueDepth is how many I/O commands one batch keeps in flight (ring size for
	// URING_CMD, worker goroutines for ioctl; 0: the transport's default).
	QueueDepth int
	// NSID selects the namespace when path is a controller node (/dev/nvmeX).
	NSID uint32
}

// Open opens an NVMe namespace (/dev/ngXnY, /dev/nvmeXnY) or controller (/dev/nvmeX) for
// passthrough. With TransportAuto it uses io_uring URING_CMD when the kernel and device
// support it and falls back to the ioctl transport otherwise.
func Open(path string, opt OpenOptions) (Transport, error) {
	switch strings.ToLower(opt.Transport) {
	case TransportIoctl:
		return OpenIoctl(path, IoctlOptions{Workers: opt.QueueDepth, NSID: opt.NSID})
	case TransportUring:
		return openUring(path, opt)
	case TransportAuto, "auto":
		if t, err := openUring(path, opt); err == nil {
			return t, nil
		}
		return OpenIoctl(path, IoctlOptions{Workers: opt.QueueDepth, NSID: opt.NSID})
	default:
		_, err := ParseTransport(opt.Transport)
		return nil, err
	}
}

// ParseTransport checks a transport name Open takes: uring, ioctl, or "" or auto for
// either (any case). It returns s.
func ParseTransport(s string) (string, error) {
	switch strings.ToLower(s) {
	case TransportAuto, "auto", TransportUring, TransportIoctl:
		return s, nil
	}
	return "", fmt.Errorf("nvme: unknown transport %q (want uring or ioctl)", s)
}
