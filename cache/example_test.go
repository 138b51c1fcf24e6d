package cache_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// A program formats a cache in a file, then opens it as rbctl put would: layout, namespace
// and checkpoint format from the device, and the same refusals as the CLI.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "cache-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "kv.img")

	dev := devices.DefaultOptions()
	dev.BufferedFallback = true // tmpfs may refuse O_DIRECT
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 64<<10, 0 // metadata region sized for every slot
	if _, _, err := cache.Format(cache.FormatOptions{Path: path, Create: 8 << 20, Config: cfg,
		Open: func() (blockdev.Device, error) { return devices.Open(path, dev) }}); err != nil {
		log.Fatal(err)
	}

	e, err := cache.Open(path, cache.OpenOptions{Device: dev})
	if err != nil {
		log.Fatal(err)
	}
	key := engine.ObjectKey("model", 0, []byte{1, 2, 3}, "tenant-a")
	if _, err := e.PutMany([]engine.Key{key}, [][]byte{[]byte("kv bytes")}); err != nil {
		log.Fatal(err)
	}
	if err := e.Close(); err != nil { // writes the final checkpoint
		log.Fatal(err)
	}

	ro, err := cache.Open(path, cache.OpenOptions{Device: dev, ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer ro.Close()
	fmt.Println(ro.Config().Namespace, ro.Usage().SlotsUsed, "entry")
	// Output: object 1 entry
}
