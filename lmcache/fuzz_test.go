package lmcache

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoad: any bytes either load into a configuration whose every device has a valid
// engine config and whose FDP settings resolve or fail cleanly, or fail with ErrConfig.
// Never panics.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		`{"type":"raw_block","device_path":"/dev/ng0n1","slot_bytes":1048576,"io_engine":"io_uring","use_uring_cmd":true,"fdp_enabled":true,"fdp_placement_ids":[1,2],"meta_checkpoint_placement_id":3}`,
		`{"extra_config":{"rust_raw_block.per_tp_device_paths":{"0":"/a","1":"/b"},"rust_raw_block.slot_bytes":69632}}`,
		`{"rust_raw_block.device_path":"d","rust_raw_block.slot_bytes":8192,"rust_raw_block.block_align":512}`,
		`{"device_path":"d","slot_bytes":4096.0,"block_align":1e3}`,
		`[]`, `{`, `{"a":{"b":[{"c":null}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, warns, err := Load(strings.NewReader(string(b)))
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if len(c.Devices) == 0 {
			t.Fatal("loaded with no device")
		}
		for _, d := range c.Devices {
			if err := d.Engine.Validate(); err != nil {
				t.Fatalf("device %q: invalid engine config: %v", d.Path, err)
			}
		}
		for _, w := range warns {
			if w.Field == "" {
				t.Fatalf("warning without a field: %v", w)
			}
		}
		p, err := c.FDP.Resolve([]uint16{0, 1, 2, 3}, 0)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("resolve error %v does not wrap ErrConfig", err)
			}
			return
		}
		for _, h := range p.Pool {
			if h < 0 || h > 3 {
				t.Fatalf("pool handle %d outside the device", h)
			}
		}
	})
}
