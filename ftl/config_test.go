package ftl

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigErrors(t *testing.T) {
	ok := Config{MappingUnit: 4096, LogicalBytes: 100 << 20, OP: 0.1, RUBytes: 1 << 20}
	cases := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no-mapping-unit", func(c *Config) { c.MappingUnit = 0 }, "MappingUnit"},
		{"ru-not-multiple", func(c *Config) { c.RUBytes = 5000 }, "RUBytes"},
		{"logical-not-multiple", func(c *Config) { c.LogicalBytes = 4097 }, "LogicalBytes"},
		{"negative-op", func(c *Config) { c.OP = -0.1 }, "OP"},
		{"too-small", func(c *Config) { c.OP = 0 }, "cannot hold"},
		{"explicit-rus-too-few", func(c *Config) { c.RUsPerGroup = 100 }, "cannot hold"},
		{"explicit-rus", func(c *Config) { c.RUsPerGroup = 120 }, ""},
		{"bad-isolation", func(c *Config) { c.Isolation = 7 }, "Isolation"},
		{"bad-handle-isolation-len", func(c *Config) { c.Handles = 2; c.HandleIsolation = []Isolation{PersistentlyIsolated} }, "HandleIsolation"},
		{"bad-gc", func(c *Config) { c.GC = 9 }, "GC policy"},
		{"negative-handles", func(c *Config) { c.Handles = -1 }, "Handles"},
		{"negative-reserve", func(c *Config) { c.FreeReserve = -1 }, "FreeReserve"},
		{"huge-op", func(c *Config) { c.OP = 1e30 }, "2^32"},
		{"negative-rus", func(c *Config) { c.RUsPerGroup = -3 }, "RUsPerGroup"},
		{"huge", func(c *Config) { c.MappingUnit = 512; c.LogicalBytes = 4 << 40; c.RUBytes = 1 << 30 }, "2^32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			_, err := New(c)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseKnobs(t *testing.T) {
	if g, err := ParseGCPolicy("cost-benefit"); err != nil || g != CostBenefit {
		t.Fatal(g, err)
	}
	if i, err := ParseIsolation("persistent"); err != nil || i != PersistentlyIsolated || i.RUHT() != 2 {
		t.Fatal(i, err)
	}
	if p, err := ParsePrecondition("sequential"); err != nil || p != Sequential {
		t.Fatal(p, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseGCPolicy("lru"); return err },
		func() error { _, err := ParseIsolation("x"); return err },
		func() error { _, err := ParsePrecondition("random"); return err },
	} {
		if err := bad(); err == nil || !strings.Contains(err.Error(), "known:") {
			t.Errorf("want an error listing the known values, got %v", err)
		}
	}
}
