package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFormatLMCacheConfig(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "c.img")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(dev, 32<<20); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "lmcache.json")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `{"type":"raw_block","device_path":%q,"slot_bytes":69632,"meta_total_bytes":2097152}`, dev), 0o600); err != nil {
		t.Fatal(err)
	}
	// DEV and --lmcache-config together, or neither: refused, nothing written.
	for _, args := range [][]string{{"format", "--lmcache-config", conf, dev}, {"format"}} {
		if code, _, se := runRbctl(t, dir, time.Minute, args...); code != 1 || !strings.Contains(se, "--lmcache-config") {
			t.Fatalf("%v: exit %d, %s", args, code, se)
		}
	}
	if code, so, se := runRbctl(t, dir, time.Minute, "format", "--lmcache-config", conf); code != 0 || !strings.Contains(so, "| 0     | "+dev) || !strings.Contains(so, "| 1 formatted |") {
		t.Fatalf("format --lmcache-config: exit %d, %s %s", code, so, se)
	}
	if code, so, se := runRbctl(t, dir, time.Minute, "inspect", dev, "--json"); code != 0 || !strings.Contains(so, `"slot_bytes": 69632`) {
		t.Fatalf("inspect after: exit %d, %s %s", code, so, se)
	}
}
