package fdp

import "fmt"

// MakePID builds a placement identifier from a reclaim group and a placement handle:
// PID = RG << (16 − RGIF) | PH, where RGIF is the configuration's reclaim group identifier
// format (bits of the PID that hold the RG; 0 when there is one reclaim group).
func MakePID(rg, ph uint16, rgif uint8) (uint16, error) {
	if rgif > 15 {
		return 0, fmt.Errorf("%w: RGIF %d > 15", ErrBadPID, rgif)
	}
	phBits := 16 - uint(rgif)
	if uint32(ph) >= 1<<phBits {
		return 0, fmt.Errorf("%w: placement handle %d needs more than %d bits", ErrBadPID, ph, phBits)
	}
	if rgif == 0 {
		if rg != 0 {
			return 0, fmt.Errorf("%w: reclaim group %d with RGIF 0", ErrBadPID, rg)
		}
		return ph, nil
	}
	if uint32(rg) >= 1<<rgif {
		return 0, fmt.Errorf("%w: reclaim group %d needs more than %d bits", ErrBadPID, rg, rgif)
	}
	return rg<<phBits | ph, nil
}

// SplitPID is the inverse of MakePID.
func SplitPID(pid uint16, rgif uint8) (rg, ph uint16) {
	if rgif == 0 {
		return 0, pid
	}
	if rgif > 15 {
		rgif = 15
	}
	phBits := 16 - uint(rgif)
	return pid >> phBits, pid & uint16(1<<phBits-1)
}

// RGIFFor returns the smallest RGIF that can hold nrg reclaim groups (0 for one group).
func RGIFFor(nrg uint32) uint8 {
	var b uint8
	for uint64(1)<<b < uint64(nrg) {
		b++
	}
	return b
}
