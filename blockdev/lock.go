package blockdev

// Single writer by construction: every file an engine opens carries a flock(2) on its own
// file descriptor — exclusive for a writer, shared for a reader, never waiting. The lock
// belongs to the open file description, so it goes away with the descriptor: a writer that
// is killed cannot leave a stale lock behind, and nothing is written next to the data. When
// the lock is refused, the holder is looked up in /proc/locks (the kernel's own list of
// held locks, matched by device and inode) and named in the error. docs/reliability.md
// "Single writer and the safety gate".

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/sys"
)

// ErrLocked: another process (or another open of the same file in this one) holds the file.
var ErrLocked = errors.New("in use")

// LockedError says who holds a file this process could not lock.
type LockedError struct {
	Path    string
	PID     int    // 0: the holder is not visible (another PID namespace, or /proc unreadable)
	Command string // "rbctl put"; "" when unknown
	Writer  bool   // the holder has it for writing (exclusive lock)
	Others  int    // further holders (several readers)
	Exited  bool   // the holder has exited; its open file lives on (in-flight io_uring I/O)
}

// lingerWait bounds how long LockFD waits for the file of an exited holder to be released
// (1 ms, doubling: about a second in all).
const lingerWait = 512 * time.Millisecond

func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: in use by ", e.Path)
	if e.PID <= 0 {
		b.WriteString("another process")
	} else {
		fmt.Fprintf(&b, "PID %d", e.PID)
		switch {
		case e.Exited:
			b.WriteString(" (exited; the kernel has not yet released its file: in-flight I/O)")
		case e.Command != "":
			fmt.Fprintf(&b, " (%s)", e.Command)
		}
	}
	switch {
	case e.Others == 1:
		b.WriteString(" and 1 other process")
	case e.Others > 1:
		fmt.Fprintf(&b, " and %d other processes", e.Others)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// LockFD takes the advisory lock of an open file for the life of fd: exclusive for a writer,
// shared for a reader (readers run together, a writer runs alone). It does not wait; a
// conflict is a *LockedError naming the holder. path is for the message.
func LockFD(fd int, path string, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	pause := time.Millisecond
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			// A live holder is reported at once. A holder that is gone is letting go: a
			// killed process's file outlives it while the kernel tears down its io_uring
			// and finishes its in-flight I/O. That is waited out, briefly.
			le := lockedError(fd, path)
			if (le.PID == 0 || le.Exited) && pause <= lingerWait {
				time.Sleep(pause)
				pause *= 2
				continue
			}
			return le
		case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP):
			// A filesystem without flock (some FUSE mounts): nothing can exclude other
			// writers there, so refuse rather than run unprotected.
			return fmt.Errorf("%s: the filesystem does not support file locks (%w); put the file on a local filesystem", path, err)
		}
		return fmt.Errorf("%s: lock: %w", path, err)
	}
}

// RelockFD converts the lock held on fd (shared to exclusive or back) without waiting. The
// kernel drops the old lock before it takes the new one, so on failure the old lock is
// taken again; if even that is refused the descriptor holds no lock and lost is true.
func RelockFD(fd int, path string, exclusive bool) (lost bool, err error) {
	err = LockFD(fd, path, exclusive)
	if err == nil || !errors.Is(err, ErrLocked) {
		return false, err
	}
	return LockFD(fd, path, !exclusive) != nil, err
}

// lockedError builds the error for a refused lock on fd.
func lockedError(fd int, path string) *LockedError {
	e := &LockedError{Path: path}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return e
	}
	b, err := sys.ReadFileBounded("/proc/locks", maxProcLocks)
	if err != nil {
		return e
	}
	var hs []lockHolder
	for _, l := range parseProcLocks(b) {
		if l.ino != st.Ino {
			continue
		}
		// The device in /proc/locks is the superblock's; stat may report another (btrfs
		// subvolumes, overlayfs). Then only the holder's open files can confirm it.
		if (l.major == unix.Major(st.Dev) && l.minor == unix.Minor(st.Dev)) || holdsFile(l.pid, st.Dev, st.Ino) {
			hs = append(hs, l)
		}
	}
	if len(hs) == 0 {
		return e
	}
	first := hs[0]
	for _, h := range hs {
		if h.write {
			first = h
			break
		}
	}
	e.PID, e.Writer, e.Others = first.pid, first.write, len(hs)-1
	e.Command = processCommand(first.pid)
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(first.pid))); errors.Is(err, fs.ErrNotExist) {
		e.Exited = true
	}
	return e
}

const (
	maxProcLocks = 4 << 20 // a system with ~50k held locks
	maxCmdline   = 4096
)

// lockHolder is one held flock from /proc/locks.
type lockHolder struct {
	pid          int
	write        bool
	major, minor uint32
	ino          uint64
}

// parseProcLocks extracts the held FLOCK locks from /proc/locks. Lines look like
//
//	3: FLOCK  ADVISORY  WRITE 1234 fd:00:2754663 0 EOF
//	3: -> FLOCK  ADVISORY  WRITE 1240 fd:00:2754663 0 EOF   (a waiter, not a holder)
//
// with the device's major and minor in hex. Anything else (POSIX, OFDLCK, LEASE, damaged
// lines) is skipped.
func parseProcLocks(b []byte) []lockHolder {
	var out []lockHolder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 256), 4096)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasSuffix(f[0], ":") || f[1] != "FLOCK" {
			continue
		}
		var h lockHolder
		switch f[3] {
		case "WRITE":
			h.write = true
		case "READ":
		default:
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid < 0 {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		min, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		h.pid, h.major, h.minor, h.ino = pid, uint32(maj), uint32(min), ino
		out = append(out, h)
	}
	return out
}

// holdsFile reports whether process pid has the file (dev, ino) open.
func holdsFile(pid int, dev, ino uint64) bool {
	if pid <= 0 {
		return false
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	for n := 0; n < 1<<16; {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			n++
			var st unix.Stat_t
			if unix.Stat(filepath.Join(dir, name), &st) == nil && st.Dev == dev && st.Ino == ino {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
	return false
}

// processCommand names a process for a message: its program and, when the next argument is
// a word (a subcommand), that too — "rbctl put". Control characters are replaced: another
// user's command line is untrusted text.
func processCommand(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := sys.ReadFileBounded(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"), maxCmdline)
	if err != nil {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	name := ""
	if len(args) > 0 && args[0] != "" {
		name = filepath.Base(args[0])
		if len(args) > 1 && args[1] != "" && !strings.HasPrefix(args[1], "-") && !strings.ContainsAny(args[1], "/=") {
			name += " " + args[1]
		}
	} else if c, err := sys.ReadFileBounded(filepath.Join("/proc", strconv.Itoa(pid), "comm"), 64); err == nil {
		name = strings.TrimSpace(string(c))
	}
	return printable(name, 64)
}

// printable keeps at most n runes of s, with anything not printable replaced by '?'.
func printable(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if n == 0 {
			b.WriteString("…")
			break
		}
		n--
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lockLoopBacking takes the lock of the regular file behind a loop device (rdev), as an
// open of that file would: a loop device over a file `rbctl serve` holds is refused as in
// use, naming the holder, and a writer on the loop device keeps rbctl writers off its file.
// It returns the open backing file, whose descriptor carries the lock (nil for a device
// that is not a loop device, or whose backing file is gone or out of reach).
func lockLoopBacking(path string, rdev uint64, exclusive bool) (*os.File, error) {
	dir := filepath.Join(sysBlockDir, fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev)), "loop")
	b, err := sys.ReadFileBounded(filepath.Join(dir, "backing_file"), 8192)
	if err != nil {
		return nil, nil // not a loop device, or an unbound one
	}
	backing := strings.TrimSpace(string(b))
	if strings.HasSuffix(backing, " (deleted)") {
		return nil, nil // nothing can open the file any more
	}
	f, err := os.OpenFile(backing, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil // another mount namespace, or no permission: nothing to share a lock with
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, nil
	}
	if err := LockFD(int(f.Fd()), backing, exclusive); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%s is a loop device over %w", path, err)
		}
		return nil, nil // a filesystem without flock: the file itself would be refused, not its loop device
	}
	return f, nil
}
