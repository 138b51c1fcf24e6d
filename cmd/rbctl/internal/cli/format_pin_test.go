package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
)

// format --meta-bytes auto is part of the on-disk layout: the same flags must give the same
// metadata region, whatever code computes it. The values below were recorded from format's
// own formula before it moved into engine.MetaBytesFor; change them only with a deliberate
// layout change (and a note in docs/format.md).
func TestFormatAutoMetaBytesUnchanged(t *testing.T) {
	for _, c := range []struct {
		dev            int64
		slot, capacity string
		compat         string
		blockAlign     int
		meta           int64
		invalid        bool // the layout is refused (the region is still computed)
	}{
		{16777216, "64K", "0", "", 4096, 1048576, false},
		{16777216, "64K", "0", "", 65536, 1048576, true},
		{16777216, "64K", "0", "lmcache-v1", 4096, 1048576, false},
		{16777216, "64K", "0", "lmcache-v1", 65536, 1048576, true},
		{16777216, "64K", "512M", "", 4096, 1048576, false},
		{16777216, "64K", "512M", "", 65536, 1048576, true},
		{16777216, "64K", "512M", "lmcache-v1", 4096, 1048576, false},
		{16777216, "64K", "512M", "lmcache-v1", 65536, 1048576, true},
		{16777216, "1M", "0", "", 4096, 1048576, false},
		{16777216, "1M", "0", "", 65536, 1048576, false},
		{16777216, "1M", "0", "lmcache-v1", 4096, 1048576, false},
		{16777216, "1M", "0", "lmcache-v1", 65536, 1048576, false},
		{16777216, "1M", "512M", "", 4096, 1048576, false},
		{16777216, "1M", "512M", "", 65536, 1048576, false},
		{16777216, "1M", "512M", "lmcache-v1", 4096, 1048576, false},
		{16777216, "1M", "512M", "lmcache-v1", 65536, 1048576, false},
		{16777216, "260K", "0", "", 4096, 1048576, false},
		{16777216, "260K", "0", "", 65536, 1048576, true},
		{16777216, "260K", "0", "lmcache-v1", 4096, 1048576, false},
		{16777216, "260K", "0", "lmcache-v1", 65536, 1048576, true},
		{16777216, "260K", "512M", "", 4096, 1048576, false},
		{16777216, "260K", "512M", "", 65536, 1048576, true},
		{16777216, "260K", "512M", "lmcache-v1", 4096, 1048576, false},
		{16777216, "260K", "512M", "lmcache-v1", 65536, 1048576, true},
		{1073741824, "64K", "0", "", 4096, 8388608, false},
		{1073741824, "64K", "0", "", 65536, 8388608, true},
		{1073741824, "64K", "0", "lmcache-v1", 4096, 16777216, false},
		{1073741824, "64K", "0", "lmcache-v1", 65536, 16777216, true},
		{1073741824, "64K", "512M", "", 4096, 4194304, false},
		{1073741824, "64K", "512M", "", 65536, 4194304, true},
		{1073741824, "64K", "512M", "lmcache-v1", 4096, 8388608, false},
		{1073741824, "64K", "512M", "lmcache-v1", 65536, 8388608, true},
		{1073741824, "1M", "0", "", 4096, 1048576, false},
		{1073741824, "1M", "0", "", 65536, 1048576, false},
		{1073741824, "1M", "0", "lmcache-v1", 4096, 1048576, false},
		{1073741824, "1M", "0", "lmcache-v1", 65536, 1048576, false},
		{1073741824, "1M", "512M", "", 4096, 1048576, false},
		{1073741824, "1M", "512M", "", 65536, 1048576, false},
		{1073741824, "1M", "512M", "lmcache-v1", 4096, 1048576, false},
		{1073741824, "1M", "512M", "lmcache-v1", 65536, 1048576, false},
		{1073741824, "260K", "0", "", 4096, 2097152, false},
		{1073741824, "260K", "0", "", 65536, 2097152, true},
		{1073741824, "260K", "0", "lmcache-v1", 4096, 4194304, false},
		{1073741824, "260K", "0", "lmcache-v1", 65536, 4194304, true},
		{1073741824, "260K", "512M", "", 4096, 1048576, false},
		{1073741824, "260K", "512M", "", 65536, 1048576, true},
		{1073741824, "260K", "512M", "lmcache-v1", 4096, 2097152, false},
		{1073741824, "260K", "512M", "lmcache-v1", 65536, 2097152, true},
		{68719476736, "64K", "0", "", 4096, 536870912, false},
		{68719476736, "64K", "0", "", 65536, 536870912, true},
		{68719476736, "64K", "0", "lmcache-v1", 4096, 1073741824, false},
		{68719476736, "64K", "0", "lmcache-v1", 65536, 1073741824, true},
		{68719476736, "64K", "512M", "", 4096, 4194304, false},
		{68719476736, "64K", "512M", "", 65536, 4194304, true},
		{68719476736, "64K", "512M", "lmcache-v1", 4096, 8388608, false},
		{68719476736, "64K", "512M", "lmcache-v1", 65536, 8388608, true},
		{68719476736, "1M", "0", "", 4096, 33554432, false},
		{68719476736, "1M", "0", "", 65536, 33554432, false},
		{68719476736, "1M", "0", "lmcache-v1", 4096, 67108864, false},
		{68719476736, "1M", "0", "lmcache-v1", 65536, 67108864, false},
		{68719476736, "1M", "512M", "", 4096, 1048576, false},
		{68719476736, "1M", "512M", "", 65536, 1048576, false},
		{68719476736, "1M", "512M", "lmcache-v1", 4096, 1048576, false},
		{68719476736, "1M", "512M", "lmcache-v1", 65536, 1048576, false},
		{68719476736, "260K", "0", "", 4096, 67108864, false},
		{68719476736, "260K", "0", "", 65536, 67108864, true},
		{68719476736, "260K", "0", "lmcache-v1", 4096, 134217728, false},
		{68719476736, "260K", "0", "lmcache-v1", 65536, 134217728, true},
		{68719476736, "260K", "512M", "", 4096, 1048576, false},
		{68719476736, "260K", "512M", "", 65536, 1048576, true},
		{68719476736, "260K", "512M", "lmcache-v1", 4096, 2097152, false},
		{68719476736, "260K", "512M", "lmcache-v1", 65536, 2097152, true},
		{4398046511104, "64K", "0", "", 4096, 34359738368, false},
		{4398046511104, "64K", "0", "", 65536, 34359738368, true},
		{4398046511104, "64K", "0", "lmcache-v1", 4096, 68719476736, false},
		{4398046511104, "64K", "0", "lmcache-v1", 65536, 68719476736, true},
		{4398046511104, "64K", "512M", "", 4096, 4194304, false},
		{4398046511104, "64K", "512M", "", 65536, 4194304, true},
		{4398046511104, "64K", "512M", "lmcache-v1", 4096, 8388608, false},
		{4398046511104, "64K", "512M", "lmcache-v1", 65536, 8388608, true},
		{4398046511104, "1M", "0", "", 4096, 2147483648, false},
		{4398046511104, "1M", "0", "", 65536, 2147483648, false},
		{4398046511104, "1M", "0", "lmcache-v1", 4096, 4294967296, false},
		{4398046511104, "1M", "0", "lmcache-v1", 65536, 4294967296, false},
		{4398046511104, "1M", "512M", "", 4096, 1048576, false},
		{4398046511104, "1M", "512M", "", 65536, 1048576, false},
		{4398046511104, "1M", "512M", "lmcache-v1", 4096, 1048576, false},
		{4398046511104, "1M", "512M", "lmcache-v1", 65536, 1048576, false},
		{4398046511104, "260K", "0", "", 4096, 4294967296, false},
		{4398046511104, "260K", "0", "", 65536, 4294967296, true},
		{4398046511104, "260K", "0", "lmcache-v1", 4096, 8589934592, false},
		{4398046511104, "260K", "0", "lmcache-v1", 65536, 8589934592, true},
		{4398046511104, "260K", "512M", "", 4096, 1048576, false},
		{4398046511104, "260K", "512M", "", 65536, 1048576, true},
		{4398046511104, "260K", "512M", "lmcache-v1", 4096, 2097152, false},
		{4398046511104, "260K", "512M", "lmcache-v1", 65536, 2097152, true},
	} {
		f := &flagsets.Layout{Slot: c.slot, Header: fmt.Sprint(c.blockAlign), Meta: "auto", Capacity: c.capacity,
			BlockAlign: c.blockAlign, Compat: c.compat, Namespace: "object"}
		cfg, err := f.Config()
		if err == nil {
			cfg, err = cache.Config(cfg, c.dev)
		}
		if cfg.MetaTotalBytes != c.meta || (err != nil) != c.invalid {
			t.Errorf("device %d, slot %s, capacity %s, compat %q, block-align %d: meta %d (err %v), want %d (invalid %v)",
				c.dev, c.slot, c.capacity, c.compat, c.blockAlign, cfg.MetaTotalBytes, err, c.meta, c.invalid)
		}
	}
}

// The bytes format writes, pinned: recorded with the commands in the table before the
// reorganisation of issue 17 (format is deterministic for a fixed --device-path).
func TestFormatImageUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 64 MiB images")
	}
	for _, c := range []struct {
		args   []string
		sha256 string
	}{
		{[]string{"--create", "64M", "--slot-bytes", "64K"}, "119ff902f61e7c01e7379eeacd597ce97ea73c07c69977489a5413ba25b49b26"},
		{[]string{"--create", "64M", "--slot-bytes", "1M", "--compat", "lmcache-v1"}, "7516647b2c39534ce1db3e2f09fb13e93c7e9e89f5a9e4abd707037bd16611c2"},
	} {
		dev := filepath.Join(t.TempDir(), "c.img")
		args := append([]string{"format", "--device-path", "/x"}, c.args...)
		if _, err := rbRun(t, "", append(args, dev)...); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dev)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != c.sha256 {
			t.Errorf("format %v: image sha256 %s, pinned %s", c.args, got, c.sha256)
		}
	}
}
