package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRegistryListsFreshLiveEntries(t *testing.T) {
	dir := t.TempDir()
	r, err := openRegistry(dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	me := registryEntry{name: "a", addr: "127.0.0.1:1", pid: os.Getpid()}
	other := registryEntry{name: "b", addr: "127.0.0.1:2", pid: os.Getpid()}
	for _, e := range []registryEntry{me, other,
		{name: "dead", addr: "127.0.0.1:3", pid: 1 << 30}, // no such process
		{name: "old", addr: "127.0.0.1:4", pid: os.Getpid()}} {
		if err := r.put(e); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(r.path("old"), old, old)
	os.WriteFile(filepath.Join(dir, "junk.node"), []byte("hello"), 0o600)
	fi, err := os.Stat(r.path("a"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("entry mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	got := r.live("a", time.Now())
	if len(got) != 1 || got[0] != other {
		t.Fatalf("live = %+v; want only %+v", got, other)
	}
	r.remove("b")
	if got := r.live("a", time.Now()); len(got) != 0 {
		t.Fatalf("after remove: %+v", got)
	}
}

func TestRegistryRefusesAWritableDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	if _, err := openRegistry(dir, time.Minute); err == nil {
		t.Fatal("a world-writable registry directory was accepted")
	}
}

func TestParseRegistryEntryRejects(t *testing.T) {
	for _, b := range []string{
		"",
		"rbctl-cluster 2\nname a\naddr 1.2.3.4:5\npid 1\n",
		"rbctl-cluster 1\nname a\naddr nowhere\npid 1\n",
		"rbctl-cluster 1\nname ../x\naddr 1.2.3.4:5\npid 1\n",
		"rbctl-cluster 1\nname a\naddr 1.2.3.4:5\npid -1\n",
		"rbctl-cluster 1\nname a\naddr 1.2.3.4:5\nuid 1\n",
	} {
		if _, err := parseRegistryEntry([]byte(b)); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseRegistryEntry(%q) = %v; want ErrMalformed", b, err)
		}
	}
}

func FuzzParseRegistryEntry(f *testing.F) {
	f.Add([]byte("rbctl-cluster 1\nname a\naddr 127.0.0.1:7946\npid 42\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseRegistryEntry(b)
		if err != nil {
			return
		}
		if !validName(e.name) || e.pid <= 0 {
			t.Fatalf("accepted %+v", e)
		}
	})
}

func TestSplitBind(t *testing.T) {
	if h, p, err := SplitBind("127.0.0.1:7946"); err != nil || h != "127.0.0.1" || p != 7946 {
		t.Fatalf("%q %d %v", h, p, err)
	}
	for _, bad := range []string{"127.0.0.1", "h:70000", "h:-1", "h:x"} {
		if _, _, err := SplitBind(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
