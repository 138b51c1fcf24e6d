// Package safety is the one gate every destructive command goes through (format, bench,
// recover writing a repaired checkpoint): Gate refuses a target that is in use — mounted,
// active swap, held by device-mapper/md, the backing file of a loop device — or that carries
// a filesystem, partition table, LVM, RAID, LUKS, swap or raw-block cache signature, or
// any other data (a non-zero byte where it probes), and says what would be destroyed. It checks the real target whatever DEV spelling names it:
// the data file of an emu: device, the namespace of /dev/ngXnY (through its block device).
// The refusal states what is there; the command says how to override it (rbctl: its force flag). docs/reliability.md "Single writer and
// the safety gate".
package safety

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/emu"
)

var (
	// ErrInUse: the target is mounted, used as swap, held by another device, or backs a
	// loop device.
	ErrInUse = errors.New("device in use")
	// ErrHasData: the target carries a recognised signature or other data.
	ErrHasData = errors.New("device holds data")
)

// Action is what the caller is about to do to the target; it decides what is in the way.
type Action int

const (
	// Format lays out a new cache: everything on the target is lost, an existing cache too.
	Format Action = iota
	// Bench formats the target for every run (rbctl bench).
	Bench
	// Recover writes a repaired checkpoint into a cache: a raw-block cache is what it
	// expects; anything else (a filesystem, ...) is refused.
	Recover
)

// refusing is the start of a refusal: "refusing to format cache.img".
func (a Action) refusing(target string) string {
	switch a {
	case Bench:
		return "refusing to run bench on " + target
	case Recover:
		return "refusing to write a repaired checkpoint to " + target
	}
	return "refusing to format " + target
}

// Gate returns nil when the command may destroy what is on dev, or an error (wrapping
// ErrInUse or ErrHasData) naming what is there, for example
//
//	refusing to format cache.img: it holds an ext4 filesystem (label "data")
//
// dev is any DEV spelling: a regular file, a block device, /dev/ngXnY, /dev/nvmeXnY, or
// emu:PATH (its data file is checked; emu:mem has nothing to lose). A path that does not
// exist, an empty file and a target that reads as zeros wherever the gate probes (the
// first 128 KiB, the last 4 KiB, 256 blocks between, a file's data extents) pass. Callers skip Gate
// only when the user overrides it (rbctl's force flag).
func Gate(a Action, dev string) error { return system.gate(a, dev, true) }

// GateInUse is the half of Gate that no override lifts: dev is mounted, active swap, held by
// device-mapper/md, or (a regular file) backs a loop device. Callers run it when the user
// overrides Gate (rbctl's force flag): --force destroys data, never a mounted filesystem.
func GateInUse(a Action, dev string) error { return system.gate(a, dev, false) }

// host is where the gate looks at the system; tests point it at a fake sysfs, proc and dev.
type host struct {
	sys, proc, dev string
}

var system = host{sys: "/sys", proc: "/proc", dev: "/dev"}

func (h host) gate(a Action, dev string, signatures bool) error {
	target, subject := dev, dev
	if emu.IsSpec(dev) {
		sp, err := emu.ParseSpec(dev)
		if err != nil {
			return err
		}
		if sp.Path == "" {
			return nil // emu:mem: a new device in memory
		}
		target, subject = sp.Path, sp.Path+" (the emulated SSD's data file)"
	}
	if isNVMeGeneric(target) {
		return h.gateNVMeGeneric(a, target, signatures)
	}
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // nothing there yet (format and bench create it when given a size)
		}
		return fmt.Errorf("%s: %w", target, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		if u := h.blockInUse(target, majMin(st.Rdev)); u != "" {
			return refuse(ErrInUse, "%s: %s; %s", a.refusing(subject), u, unuseHint(u))
		}
	case unix.S_IFREG:
		if st.Size == 0 {
			return nil
		}
		if u := h.fileInUse(target); u != "" {
			return refuse(ErrInUse, "%s: %s; %s", a.refusing(subject), u, detachHint(u))
		}
	default:
		return nil // not a device rbctl writes through; opening it fails with the reason
	}
	if !signatures {
		return nil
	}
	return h.gateSignatures(a, subject, dev, target)
}

// gateSignatures reads target (a file or block device) and refuses what it recognises.
func (h host) gateSignatures(a Action, subject, dev, target string) error {
	f, err := os.Open(target)
	if err != nil {
		return fmt.Errorf("%s: cannot read it to check for existing data: %w", target, err)
	}
	defer f.Close()
	size, err := sizeOf(f)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	return refuseSignatures(a, subject, dev, f, size)
}

// refuseSignatures is the signature half of the gate over any reader of the target.
func refuseSignatures(a Action, subject, dev string, r io.ReaderAt, size int64) error {
	sigs, err := Detect(r, size)
	if err != nil {
		return fmt.Errorf("%s: reading for signatures: %w", subject, err)
	}
	var found []Signature
	cache := false
	for _, s := range sigs {
		if s.Cache {
			cache = true
			if a == Recover {
				continue // what recover repairs
			}
		}
		found = append(found, s)
	}
	if len(found) == 0 && a != Recover {
		at, err := firstData(r, size)
		if err != nil {
			return fmt.Errorf("%s: reading for data: %w", subject, err)
		}
		if at >= 0 {
			return refuse(ErrHasData, "%s: it holds data rbctl does not recognise (a non-zero byte at byte %d; a blank target reads as zeros)",
				a.refusing(subject), at)
		}
	}
	if len(found) == 0 {
		return nil
	}
	what := make([]string, len(found))
	for i, s := range found {
		what[i] = s.Describe()
	}
	list := strings.Join(what, " and ")
	if cache && a != Recover && len(found) == 1 {
		return refuse(ErrHasData, "%s: it holds %s; inspect it (rbctl inspect %s)",
			a.refusing(subject), list, dev)
	}
	if a == Recover {
		return refuse(ErrHasData, "%s: it holds %s, not a raw-block cache", a.refusing(subject), list)
	}
	return refuse(ErrHasData, "%s: it holds %s", a.refusing(subject), list)
}

// refusal is a gate's answer: its message reads on its own, errors.Is finds its kind.
type refusal struct {
	msg  string
	kind error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, a ...any) error {
	return &refusal{msg: fmt.Sprintf(format, a...), kind: kind}
}

// detachHint says how to free a file a loop device uses ("it backs /dev/loop0 (mounted at /m)").
func detachHint(u string) string {
	if strings.Contains(u, "mounted at") {
		return "unmount it and detach the loop device first (umount, losetup -d)"
	}
	return "detach the loop device first (losetup -d)"
}

func unuseHint(u string) string {
	switch {
	case strings.Contains(u, "swap"):
		return "swapoff it first"
	case strings.Contains(u, "held by"):
		return "remove that first (dmsetup/lvchange/mdadm)"
	}
	return "unmount it first"
}

// sizeOf is the size of an open file or block device.
func sizeOf(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		n, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
		if err != nil {
			return 0, fmt.Errorf("BLKGETSIZE64: %w", err)
		}
		return int64(n), nil
	}
	return st.Size(), nil
}

func majMin(rdev uint64) string { return fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev)) }
