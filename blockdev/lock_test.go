package blockdev

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envLockHolder makes the test binary a helper process that opens the file it names for
// writing, says "locked" and waits on stdin: the other side of the cross-process tests.
const envLockHolder = "RBCTL_BLOCKDEV_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if p := os.Getenv(envLockHolder); p != "" {
		d, err := OpenFile(p, FileOptions{QueueDepth: 1})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin or kills us
		d.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFileLockReadersShareWritersExclude(t *testing.T) {
	p := tempFile(t, 1<<20)
	open := func(ro bool) (*File, error) { return OpenFile(p, FileOptions{ReadOnly: ro, QueueDepth: 1}) }
	w, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := open(ro)
		var le *LockedError
		if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
			t.Fatalf("second open (read-only %v) while a writer holds it: %v", ro, err)
		}
		// The holder is this very process (another open file description of the file).
		if le.PID != os.Getpid() || !le.Writer || !strings.Contains(err.Error(), fmt.Sprintf("in use by PID %d", os.Getpid())) {
			t.Errorf("error %q / %+v does not name this process as the writer", err, *le)
		}
	}
	w.Close()
	r1, err := open(true)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := open(true)
	if err != nil {
		t.Fatalf("two readers: %v", err)
	}
	if _, err := open(false); !errors.Is(err, ErrLocked) {
		t.Fatalf("writer while two readers: %v", err)
	} else if !strings.Contains(err.Error(), "and 1 other process") {
		t.Errorf("error %q does not count the second reader", err)
	}
	r1.Close()
	r2.Close()
	w, err = open(false)
	if err != nil {
		t.Fatalf("writer after the readers closed: %v", err)
	}
	w.Close()
}

func TestCreateFileIsPrivateAndRefusesAHeldFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "new.img")
	if err := CreateFile(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", st.Mode(), err)
	}
	d, err := OpenFile(p, FileOptions{QueueDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := CreateFile(p, 2<<20); !errors.Is(err, ErrLocked) {
		t.Fatalf("extending a file a writer holds: %v", err)
	}
	if st, _ := os.Stat(p); st.Size() != 1<<20 {
		t.Fatalf("size changed to %d", st.Size())
	}
}

func TestRelockKeepsTheOldLockOnFailure(t *testing.T) {
	p := tempFile(t, 4096)
	fd1, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd1)
	fd2, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := LockFD(fd1, p, false); err != nil {
		t.Fatal(err)
	}
	if err := LockFD(fd2, p, false); err != nil {
		t.Fatal(err)
	}
	if lost, err := RelockFD(fd1, p, true); !errors.Is(err, ErrLocked) || lost {
		t.Fatalf("upgrade beside another reader: lost %v, %v", lost, err)
	}
	unix.Close(fd2)
	// fd1 still holds its shared lock: a writer is refused.
	if _, err := OpenFile(p, FileOptions{QueueDepth: 1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("writer after a failed upgrade: %v (the reader's lock was lost)", err)
	}
	if lost, err := RelockFD(fd1, p, true); err != nil || lost {
		t.Fatalf("upgrade alone: lost %v, %v", lost, err)
	}
	if _, err := OpenFile(p, FileOptions{ReadOnly: true, QueueDepth: 1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader after the upgrade: %v", err)
	}
}

// TestLockHeldByAnotherProcessIsNamedAndDiesWithIt: a writer in another process is named by
// PID and command; once it is killed (no chance to clean up) the file opens again.
func TestLockHeldByAnotherProcessIsNamedAndDiesWithIt(t *testing.T) {
	p := tempFile(t, 1<<20)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envLockHolder+"="+p)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	_, err = OpenFile(p, FileOptions{ReadOnly: true, QueueDepth: 1})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid || !le.Writer ||
		!strings.Contains(err.Error(), "in use by PID "+strconv.Itoa(cmd.Process.Pid)+" ("+filepath.Base(os.Args[0])) {
		t.Errorf("open beside the helper: %v (%+v), want it named as PID %d (%s)", err, le, cmd.Process.Pid, filepath.Base(os.Args[0]))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	d, err := OpenFile(p, FileOptions{QueueDepth: 1})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	d.Close()
}

func TestParseProcLocks(t *testing.T) {
	in := "1: FLOCK  ADVISORY  WRITE 1234 fd:00:2754663 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 1240 fd:00:2754663 0 EOF\n" +
		"2: POSIX  ADVISORY  WRITE 99 08:01:5 0 EOF\n" +
		"3: FLOCK  ADVISORY  READ 77 103:2:42 0 EOF\n" +
		"4: OFDLCK ADVISORY  READ -1 00:05:7 0 EOF\n" +
		"5: FLOCK  ADVISORY  WRITE 12 zz:00:1 0 EOF\n" +
		"garbage\n"
	got := parseProcLocks([]byte(in))
	want := []lockHolder{
		{pid: 1234, write: true, major: 0xfd, minor: 0, ino: 2754663},
		{pid: 77, write: false, major: 0x103, minor: 2, ino: 42},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPrintableCommand(t *testing.T) {
	if got := printable("rbctl\x1b[2J put\n", 64); got != "rbctl?[2J put?" {
		t.Errorf("control characters kept: %q", got)
	}
	if got := printable(strings.Repeat("a", 100), 8); got != "aaaaaaaa…" {
		t.Errorf("not cut: %q", got)
	}
}

// FuzzParseProcLocks: /proc/locks is kernel text, but it is parsed with bounds all the same.
func FuzzParseProcLocks(f *testing.F) {
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 1234 fd:00:2754663 0 EOF\n"))
	f.Add([]byte("1: -> FLOCK ADVISORY READ 1 0:0:0 0 EOF\n2: FLOCK ADVISORY READ 18446744073709551616 ff:ff:99999999999999999999 0 EOF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, h := range parseProcLocks(b) {
			if h.pid < 0 {
				t.Fatalf("negative pid %+v", h)
			}
		}
	})
}

func TestLockedErrorMessages(t *testing.T) {
	for _, c := range []struct {
		e    LockedError
		want string
	}{
		{LockedError{Path: "c.img", PID: 12, Command: "rbctl put", Writer: true}, "c.img: in use by PID 12 (rbctl put)"},
		{LockedError{Path: "c.img", PID: 12, Command: "rbctl ls", Others: 2}, "c.img: in use by PID 12 (rbctl ls) and 2 other processes"},
		{LockedError{Path: "c.img", PID: 12, Exited: true}, "c.img: in use by PID 12 (exited; the kernel has not yet released its file: in-flight I/O)"},
		{LockedError{Path: "c.img"}, "c.img: in use by another process"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
