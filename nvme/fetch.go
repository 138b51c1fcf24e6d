package nvme

import (
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
)

// Helpers that send a command through a Transport and decode the answer. Data buffers come
// from blockdev.Alloc (page aligned, outside the Go heap), as passthrough requires.

// MaxLogChunk is the largest piece GetLog reads with one command. Every controller rbctl
// meets transfers 64 KiB in one command (MDTS >= 4 with 4 KiB pages); larger logs are read
// in pieces at increasing offsets.
const MaxLogChunk = 64 << 10

func withBuffer(n int, f func(buf []byte) error) error {
	buf, err := blockdev.Alloc(n)
	if err != nil {
		return err
	}
	defer blockdev.Free(buf)
	return f(buf)
}

// AdminRead runs an admin command that reads n bytes (the builder receives the buffer) and
// returns a copy of the data and the completion result.
func AdminRead(t Transport, n int, build func(buf []byte) (Command, error)) (data []byte, result uint64, err error) {
	err = withBuffer(n, func(buf []byte) error {
		c, err := build(buf)
		if err != nil {
			return err
		}
		result, err = RunAdmin(t, &c)
		if err != nil {
			return err
		}
		data = append([]byte(nil), buf...)
		return nil
	})
	return data, result, err
}

// IORead is AdminRead for an I/O command (e.g. I/O Management Receive).
func IORead(t Transport, n int, build func(buf []byte) (Command, error)) (data []byte, result uint64, err error) {
	err = withBuffer(n, func(buf []byte) error {
		c, err := build(buf)
		if err != nil {
			return err
		}
		result, err = RunIO(t, &c)
		if err != nil {
			return err
		}
		data = append([]byte(nil), buf...)
		return nil
	})
	return data, result, err
}

func identify(t Transport, build func(buf []byte) Command) ([]byte, error) {
	b, _, err := AdminRead(t, IdentifyDataLen, func(buf []byte) (Command, error) { return build(buf), nil })
	return b, err
}

// ReadController sends Identify Controller and decodes it.
func ReadController(t Transport) (*ControllerData, error) {
	b, err := identify(t, IdentifyController)
	if err != nil {
		return nil, err
	}
	return DecodeController(b)
}

// ReadNamespace sends Identify Namespace for nsid and decodes it.
func ReadNamespace(t Transport, nsid uint32) (*NamespaceData, error) {
	b, err := identify(t, func(buf []byte) Command { return IdentifyNamespace(nsid, buf) })
	if err != nil {
		return nil, err
	}
	return DecodeNamespace(b)
}

// ReadIndependentNamespace sends Identify CNS 0x08 for nsid and decodes it.
func ReadIndependentNamespace(t Transport, nsid uint32) (*IndependentNamespaceData, error) {
	b, err := identify(t, func(buf []byte) Command { return IdentifyIndependentNamespace(nsid, buf) })
	if err != nil {
		return nil, err
	}
	return DecodeIndependentNamespace(b)
}

// MaxActiveNamespaces is the most NSIDs ReadActiveNamespaces collects (1024 list pages): a
// controller reporting more is refused rather than followed page after page.
const MaxActiveNamespaces = 1 << 20

// ErrNamespaceList: an active namespace list that is not ascending, or longer than
// MaxActiveNamespaces.
var ErrNamespaceList = errors.New("nvme: invalid active namespace list")

// ReadActiveNamespaces lists every active NSID (following pages of 1024). Each page must
// list NSIDs above the previous page's last one in ascending order, as the specification
// requires, so a device that repeats a page cannot keep the loop (and the list) growing.
func ReadActiveNamespaces(t Transport) ([]uint32, error) {
	var all []uint32
	after := uint32(0)
	for {
		b, err := identify(t, func(buf []byte) Command { return IdentifyActiveNamespaces(after, buf) })
		if err != nil {
			return all, err
		}
		ids := DecodeNamespaceList(b)
		for _, id := range ids {
			if id <= after || id >= NSIDAll {
				return all, fmt.Errorf("%w: NSID %#x after %#x (want ascending, below %#x)", ErrNamespaceList, id, after, uint32(NSIDAll))
			}
			after = id
		}
		all = append(all, ids...)
		if len(ids) < IdentifyDataLen/4 || after >= NSIDAll-1 {
			return all, nil
		}
		if len(all) >= MaxActiveNamespaces {
			return all, fmt.Errorf("%w: more than %d active namespaces", ErrNamespaceList, MaxActiveNamespaces)
		}
	}
}

// GetLog reads length bytes of the log page p (starting at p.Offset) through t, in pieces
// of at most MaxLogChunk. Every piece but the last has RAE set, so an asynchronous event is
// cleared only by the final read (as the specification asks). length must be a positive
// multiple of 4.
func GetLog(t Transport, p LogPage, length int) ([]byte, error) {
	return GetLogChunked(t, p, length, MaxLogChunk)
}

// GetLogChunked is GetLog with a chosen piece size (a positive multiple of 4).
func GetLogChunked(t Transport, p LogPage, length, chunk int) ([]byte, error) {
	if length <= 0 || length%4 != 0 {
		return nil, fmt.Errorf("nvme: log length %d must be a positive multiple of 4", length)
	}
	if chunk <= 0 || chunk%4 != 0 {
		return nil, fmt.Errorf("nvme: log piece size %d must be a positive multiple of 4", chunk)
	}
	if chunk > length {
		chunk = length
	}
	// The result grows as pieces arrive: a length no device ever fills costs nothing up front.
	out := make([]byte, 0, chunk)
	err := withBuffer(chunk, func(buf []byte) error {
		for done := 0; done < length; {
			n := min(chunk, length-done)
			q := p
			q.Offset = p.Offset + uint64(done)
			q.RAE = p.RAE || done+n < length
			c, err := GetLogPage(q, buf[:n])
			if err != nil {
				return err
			}
			if _, err := RunAdmin(t, &c); err != nil {
				return err
			}
			out = append(out, buf[:n]...)
			done += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetFeature runs Get Features and returns DW0 of the completion (and the data, if n > 0).
func GetFeature(t Transport, fid FeatureID, sel uint8, nsid, cdw11 uint32, n int) (dw0 uint32, data []byte, err error) {
	if n == 0 {
		c := GetFeatures(fid, sel, nsid, cdw11, nil)
		r, err := RunAdmin(t, &c)
		return uint32(r), nil, err
	}
	data, r, err := AdminRead(t, n, func(buf []byte) (Command, error) {
		return GetFeatures(fid, sel, nsid, cdw11, buf), nil
	})
	return uint32(r), data, err
}
