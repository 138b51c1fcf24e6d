package cli

// Single writer and the safety gate, through the real command line in child processes
// (runRbctl): concurrent writers never lose an acknowledged key, every destructive path is
// refused with the target unchanged, read-only commands create nothing, data files are 0600.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/devices"
)

// ext4Image writes an image holding an ext4 filesystem labelled "data": made by mkfs.ext4
// when it is installed, else a synthetic superblock (magic, extents feature, label).
func ext4Image(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	if mkfs, err := exec.LookPath("mkfs.ext4"); err == nil {
		if out, err := exec.Command(mkfs, "-q", "-F", "-L", "data", path).CombinedOutput(); err == nil {
			return
		} else {
			t.Logf("mkfs.ext4 failed (%v: %s); using a synthetic superblock", err, out)
		}
	}
	sb := make([]byte, 1024)
	binary.LittleEndian.PutUint16(sb[56:], 0xEF53)
	binary.LittleEndian.PutUint32(sb[96:], 0x40)
	copy(sb[120:], "data")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(sb, 1024); err != nil {
		t.Fatal(err)
	}
}

// refused runs rbctl, which must fail with want in its stderr and leave dir as it was.
func refused(t *testing.T, dir string, want string, args ...string) {
	t.Helper()
	before := snapshot(t, dir)
	code, out, errOut := runRbctl(t, dir, 2*time.Minute, args...)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("rbctl %s: exit %d, stderr %q, stdout %q; want a refusal naming %q", strings.Join(args, " "), code, errOut, out, want)
	}
	if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
		t.Errorf("rbctl %s changed the target: %v", strings.Join(args, " "), d)
	}
}

func mustRbctl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	code, out, errOut := runRbctl(t, dir, 2*time.Minute, args...)
	if code != 0 {
		t.Fatalf("rbctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// TestConcurrentPutProcesses: 8 `rbctl put` processes of distinct keys at once on one cache,
// several trials. Each either acknowledges ("stored", exit 0) — and its key then reads back
// byte-exact — or is refused with the "in use" error and a non-zero exit. Nothing else.
func TestConcurrentPutProcesses(t *testing.T) {
	dir := t.TempDir()
	for _, dev := range []string{
		filepath.Join(dir, "cache.img"),
		"emu:" + filepath.Join(dir, "emu.img") + "?size=64M&ru=1M&ruhs=4",
	} {
		args := []string{"format", "--slot-bytes", "64K", dev}
		if !strings.HasPrefix(dev, "emu:") {
			args = append(args, "--create", "64M")
		}
		mustRbctl(t, dir, args...)
		const procs, trials = 8, 3
		acked := map[string][]byte{}
		refusals := 0
		for trial := 0; trial < trials; trial++ {
			var wg sync.WaitGroup
			type result struct {
				hash        string
				payload     []byte
				code        int
				out, errOut string
			}
			res := make([]result, procs)
			for i := range res {
				p := make([]byte, 1000+i*517)
				rand.Read(p)
				hash := fmt.Sprintf("%02x%02x", trial, i)
				in := filepath.Join(dir, "in-"+hash)
				if err := os.WriteFile(in, p, 0o600); err != nil {
					t.Fatal(err)
				}
				res[i] = result{hash: hash, payload: p}
				wg.Add(1)
				go func(r *result) {
					defer wg.Done()
					r.code, r.out, r.errOut = runRbctl(t, dir, 2*time.Minute, "put", dev, "--model", "m", "--hash", r.hash, in)
				}(&res[i])
			}
			wg.Wait()
			for _, r := range res {
				switch {
				case r.code == 0 && strings.HasPrefix(r.out, "stored "):
					acked[r.hash] = r.payload
				case r.code != 0 && strings.Contains(r.errOut, ": in use by "):
					refusals++
				default:
					t.Fatalf("%s put %s: exit %d, stdout %q, stderr %q: neither acknowledged nor refused as in use", dev, r.hash, r.code, r.out, r.errOut)
				}
			}
		}
		if len(acked) == 0 {
			t.Fatalf("%s: no put was acknowledged", dev)
		}
		for hash, want := range acked {
			out := filepath.Join(dir, "out")
			mustRbctl(t, dir, "get", dev, "--model", "m", "--hash", hash, "-o", out)
			got, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: acknowledged key %s reads back %d bytes (%v), want the %d stored", dev, hash, len(got), err, len(want))
			}
		}
		ls := mustRbctl(t, dir, "ls", dev)
		if n := strings.Count(ls, "m@0x00000000@"); n != len(acked) {
			t.Fatalf("%s: ls lists %d keys, %d were acknowledged:\n%s", dev, n, len(acked), ls)
		}
		t.Logf("%s: %d processes x %d trials: %d acknowledged (all read back byte-exact), %d refused as in use",
			dev, procs, trials, len(acked), refusals)
	}
}

// TestWriterRefusedWhileAnotherProcessHoldsTheDevice names the holder.
func TestWriterRefusedWhileAnotherProcessHoldsTheDevice(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "cache.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	d, err := devices.Open(dev, devices.Options{ReadOnly: true, QueueDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := dev + ": in use by PID " + strconv.Itoa(os.Getpid()) + " (cli.test"
	refused(t, dir, want, "put", dev, "--model", "m", "--hash", "01")
	refused(t, dir, want, "format", "--force", dev)
	// Readers share the device.
	mustRbctl(t, dir, "inspect", dev)
}

func TestFormatRefusesAFilesystemAndAnExistingCache(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	ext4Image(t, img, 32<<20)
	refused(t, dir, "refusing to format "+img+`: it holds an ext4 filesystem (label "data"); pass --force to destroy it`, "format", img)
	refused(t, dir, "refusing to format", "format", "--create", "64M", img) // not extended either

	emuDev := "emu:" + filepath.Join(dir, "e.img") + "?size=32M&ru=1M&ruhs=4&op=0.25"
	mustRbctl(t, dir, "format", "--slot-bytes", "64K", emuDev)
	mustRbctl(t, dir, "put", emuDev, "--model", "m", "--hash", "aa", "-")
	refused(t, dir, "refusing to format "+filepath.Join(dir, "e.img")+" (the emulated SSD's data file): it holds an rbctl/LMCache raw-block cache", "format", emuDev)

	// An emu: device whose data file is someone's filesystem image.
	refused(t, dir, `it holds an ext4 filesystem (label "data")`, "format", "emu:"+img+"?size=32M&ru=1M")

	// --force is the way past the gate.
	mustRbctl(t, dir, "format", "--force", "--slot-bytes", "64K", img)
	mustRbctl(t, dir, "inspect", img)
}

func TestBenchRefusesDataItDidNotMake(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	ext4Image(t, img, 32<<20)
	bench := []string{"--requests", "50", "--duration", "0", "--warmup", "0", "--quiet", "--placement", "none", "--json"}
	refused(t, dir, "refusing to run bench on "+img+`: it holds an ext4 filesystem (label "data"); pass --force to destroy it`,
		append([]string{"bench", img}, bench...)...)
	refused(t, dir, "refusing to run bench on "+img+" (the emulated SSD's data file): it holds an ext4 filesystem",
		append([]string{"bench", "emu:" + img + "?size=32M&ru=1M&ruhs=4&op=0.25"}, bench...)...)

	cache := filepath.Join(dir, "cache.img")
	mustRbctl(t, dir, "format", "--create", "32M", "--slot-bytes", "64K", cache)
	refused(t, dir, "it holds an rbctl/LMCache raw-block cache", append([]string{"bench", cache}, bench...)...)

	// A new emulated device: bench makes it, runs on it, and leaves it (private) in place.
	fresh := filepath.Join(dir, "bench.img")
	mustRbctl(t, dir, append([]string{"bench", "emu:" + fresh + "?size=32M&ru=1M&ruhs=4&op=0.25", "--model", "tiny", "--bytes-per-token", "64"}, bench...)...)
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bench's emulated device: %v %v, want it kept with mode 0600", st, err)
	}
	// A new file made with --size is private too.
	file := filepath.Join(dir, "bench-file.img")
	mustRbctl(t, dir, append([]string{"bench", file, "--size", "32M", "--ru", "128K", "--io-engine", "posix", "--model", "tiny", "--bytes-per-token", "64"}, bench...)...)
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bench --size file: %v %v, want mode 0600", st, err)
	}
}

// TestFormatAndBenchRefuseDataTheyDoNotRecognise: a file with no signature but data in it
// (text at byte 0 of zeros, random bytes, one byte deep in a sparse file) is refused by
// format and bench alike, unchanged, naming where the data is; a file of zeros is formatted;
// --force is the way past (second hostile battery 3).
func TestFormatAndBenchRefuseDataTheyDoNotRecognise(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, size int64, at int64, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := make([]byte, 64<<20)
	for i := range random {
		random[i] = byte(i*7919 + i>>11 + 1)
	}
	bench := []string{"--requests", "20", "--duration", "0", "--warmup", "0", "--quiet", "--placement", "none", "--json"}
	for _, c := range []struct {
		name string
		at   int64
		b    []byte
		want int64
	}{
		{"important.img", 0, []byte("IMPORTANT USER DATA"), 0},
		{"random.img", 0, random, 0},
		{"deep.img", 40<<20 + 4097, []byte{1}, 40<<20 + 4097},
	} {
		p := mk(c.name, 64<<20, c.at, c.b)
		want := fmt.Sprintf(": it holds data rbctl does not recognise (a non-zero byte at byte %d; a blank target reads as zeros); pass --force to destroy it", c.want)
		refused(t, dir, "refusing to format "+p+want, "format", "--slot-bytes", "64K", p)
		refused(t, dir, "refusing to run bench on "+p+want, append([]string{"bench", p}, bench...)...)
		mustRbctl(t, dir, "format", "--force", "--slot-bytes", "64K", p)
	}
	zeros := mk("zeros.img", 32<<20, 0, make([]byte, 32<<20))
	mustRbctl(t, dir, "format", "--slot-bytes", "64K", zeros)
}

// TestPutAndRmNeverCreateALayout: put and rm write only into an existing cache.
func TestPutAndRmNeverCreateALayout(t *testing.T) {
	dir := t.TempDir()
	missing := "emu:" + filepath.Join(dir, "none.img") + "?size=32M"
	for _, cmd := range [][]string{
		{"put", missing, "--model", "m", "--hash", "01", "-"},
		{"rm", missing, "--model", "m", "--hash", "01"},
	} {
		before := snapshot(t, dir)
		if code, _, errOut := runRbctl(t, dir, time.Minute, cmd...); code != exitNotFound {
			t.Errorf("%s on a missing emu: device: exit %d (%s), want %d", cmd[0], code, errOut, exitNotFound)
		}
		if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
			t.Errorf("%s created %v", cmd[0], d)
		}
	}
	img := filepath.Join(dir, "fs.img")
	ext4Image(t, img, 32<<20)
	refused(t, dir, "no metadata container", "put", img, "--model", "m", "--hash", "01", "-")
	refused(t, dir, "no metadata container", "put", "emu:"+img+"?size=32M&ru=1M", "--model", "m", "--hash", "01", "-")
	refused(t, dir, "no metadata container", "rm", img, "--model", "m", "--hash", "01")
}

// TestReadOnlyCommandsCreateNothing: on an emu: path that does not exist every read-only
// command exits 3 and leaves no file behind.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	dev := "emu:" + filepath.Join(dir, "no", "such", "file") + "?size=64M"
	dev2 := "emu:" + filepath.Join(dir, "absent.img")
	for _, args := range [][]string{
		{"inspect", dev}, {"inspect", dev2}, {"ls", dev2}, {"get", dev2, "--model", "m", "--hash", "01"},
		{"identify", dev2}, {"fdp-status", dev2}, {"fdp", "configs", dev2}, {"fdp", "status", dev2},
		{"fdp", "feature", dev2}, {"nvme", "log", dev2, "--lid", "2"}, {"recover", "--dry-run", dev2},
	} {
		before := snapshot(t, dir)
		code, _, errOut := runRbctl(t, dir, time.Minute, args...)
		if code != exitNotFound {
			t.Errorf("rbctl %s: exit %d (%s), want %d", strings.Join(args, " "), code, strings.TrimSpace(errOut), exitNotFound)
		}
		if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
			t.Errorf("rbctl %s created %v", strings.Join(args, " "), d)
		}
	}
}

func TestDataFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cache.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", file)
	data := filepath.Join(dir, "e.img")
	mustRbctl(t, dir, "format", "--slot-bytes", "64K", "emu:"+data+"?size=16M&ru=1M")
	for _, p := range []string{file, data, data + ".fdp"} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", p, st, err)
		}
	}
}
