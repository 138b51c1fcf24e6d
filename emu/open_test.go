package emu

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

func fileSpec(t *testing.T) (spec, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ssd.img")
	return "emu:" + path + "?size=16M&ru=1M&ruhs=2&op=0.5", path
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestOpenWithoutCreateMakesNothing(t *testing.T) {
	spec, path := fileSpec(t)
	for _, opt := range []OpenOptions{{ReadOnly: true}, {}, {ReadOnly: true, Create: true}} {
		if _, err := OpenWith(spec, opt); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%+v on a missing data file: %v, want fs.ErrNotExist", opt, err)
		}
		if _, _, err := openDevice(spec, nvme.DeviceOptions{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read-only device on a missing data file: %v", err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
		t.Fatalf("created %v", ents)
	}
	// An empty file is no device either, and is left empty.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWith(spec, OpenOptions{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only on an empty data file: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != 0 {
		t.Errorf("empty data file grew to %d", st.Size())
	}
}

func TestCreatedDataFilesArePrivate(t *testing.T) {
	spec, path := fileSpec(t)
	created, err := Create(spec)
	if err != nil || !created {
		t.Fatalf("Create: %v %v", created, err)
	}
	for _, p := range []string{path, statePath(path)} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", p, st.Mode(), err)
		}
	}
	if created, err := Create(spec); err != nil || created {
		t.Errorf("second Create: %v %v (must leave the device alone)", created, err)
	}
}

func TestOneWriterManyReaders(t *testing.T) {
	spec, path := fileSpec(t)
	w := open(t, spec)
	for _, ro := range []bool{false, true} {
		_, err := OpenWith(spec, OpenOptions{ReadOnly: ro})
		var le *blockdev.LockedError
		if !errors.As(err, &le) || le.Path != path || le.PID != os.Getpid() {
			t.Fatalf("open (read-only %v) beside a writer: %v", ro, err)
		}
	}
	if st := writePID(t, w, 0, 4, 2, 1, 0xa5); st.Status != 0 || st.Err != nil {
		t.Fatal(st)
	}
	w.Close()

	r1, err := OpenWith(spec, OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := OpenWith(spec, OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := OpenWith(spec, OpenOptions{}); !errors.Is(err, blockdev.ErrLocked) {
		t.Fatalf("writer beside readers: %v", err)
	}
	buf := aligned(t, 4096)
	rd := nvme.Read(NSID, 0, 1, buf)
	if _, err := nvme.RunIO(r2, &rd); err != nil || buf[0] != 0xa5 {
		t.Fatalf("read on a reader: %v %#x", err, buf[0])
	}
	// A reader cannot change the device, nor claim it while another reader has it open.
	data, state := sum(t, path), sum(t, statePath(path))
	if st := writePID(t, r2, 8, 1, 0, 0, 1); st.Status != stWriteProtected {
		t.Errorf("write on a reader: status %#x, want Namespace Write Protected", st.Status)
	}
	if err := fdp.SetFeature(r2, EndGID, fdp.FeatureState{Enabled: false}, true); !errors.Is(err, blockdev.ErrLocked) {
		t.Errorf("set feature beside another reader: %v", err)
	}
	r2.Close()
	if sum(t, path) != data || sum(t, statePath(path)) != state {
		t.Fatal("readers changed the data or state file")
	}
	// Alone, the reader claims the device for a state change, which is then saved.
	if err := fdp.SetFeature(r1, EndGID, fdp.FeatureState{Enabled: false}, true); err != nil {
		t.Fatalf("set feature on the only reader: %v", err)
	}
	if _, err := OpenWith(spec, OpenOptions{ReadOnly: true}); !errors.Is(err, blockdev.ErrLocked) {
		t.Errorf("reader beside a claimed device: %v", err)
	}
	r1.Close()
	c := open(t, "emu:"+path)
	defer c.Close()
	if f, err := fdp.GetFeature(c, EndGID); err != nil || f.Enabled {
		t.Errorf("FDP after the claimed change: %+v %v", f, err)
	}
}

func TestUnchangedDeviceLeavesNoStateFile(t *testing.T) {
	spec, path := fileSpec(t)
	if err := os.WriteFile(path, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := OpenWith(spec, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := aligned(t, 4096)
	rd := nvme.Read(NSID, 0, 1, buf)
	if _, err := nvme.RunIO(c, &rd); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := os.Stat(statePath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a session that only read wrote %s: %v", statePath(path), err)
	}
}

func TestResetIsANewDevice(t *testing.T) {
	spec, path := fileSpec(t)
	c := open(t, spec)
	defer c.Close()
	for i := uint64(0); i < 64; i++ {
		if st := writePID(t, c, i*64, 64, 2, uint16(i%2), 0x77); st.Status != 0 || st.Err != nil {
			t.Fatal(st)
		}
	}
	if s := stats(t, c); s.HBMW.IsZero() {
		t.Fatal("no host bytes written")
	}
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, c); !s.HBMW.IsZero() || !s.MBMW.IsZero() || !s.MBE.IsZero() {
		t.Errorf("stats after reset: %+v", s)
	}
	if ms := c.ModelStats(); ms.ValidBytes != 0 || ms.HostBytes != 0 {
		t.Errorf("model after reset: valid %d host %d", ms.ValidBytes, ms.HostBytes)
	}
	buf := aligned(t, 64*4096)
	rd := nvme.Read(NSID, 0, 64, buf)
	if _, err := nvme.RunIO(c, &rd); err != nil || !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Errorf("data after reset is not zero: %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 16<<20 {
		t.Errorf("data file after reset: %v %v", st, err)
	}
	ro, err := OpenWith("emu:"+path, OpenOptions{ReadOnly: true})
	if err == nil {
		ro.Close()
		t.Error("reset released the lock")
	}
}

// ResolveSpec of "emu:PATH" alone gives the geometry the device was made with (bench checks
// GC feasibility with it before opening), and the spec as parsed for a new device.
func TestResolveSpecReadsTheSavedGeometry(t *testing.T) {
	spec, path := fileSpec(t) // 16M, 1M RUs, 2 handles, op 0.5
	if sp, err := ResolveSpec("emu:" + path); err != nil || sp.OP == 0.5 {
		t.Fatalf("before the device exists: %+v, %v (want the defaults)", sp, err)
	}
	c, err := OpenWith(spec, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	sp, err := ResolveSpec("emu:" + path)
	if err != nil || sp.OP != 0.5 || sp.RUHs != 2 || sp.Size != 16<<20 {
		t.Fatalf("emu:PATH of a device made as %s: %+v, %v", spec, sp, err)
	}
}
