package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
)

// A node in a program: format a cache file, start a node on it with a RESP front end, store
// and read a chunk as LMCache's resp connector would, and close it (final checkpoint).
func ExampleStart() {
	dir, _ := os.MkdirTemp("", "node-example")
	defer os.RemoveAll(dir)
	dev := filepath.Join(dir, "cache.img")
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 4096+64<<10, 0
	if _, _, err := cache.Format(cache.FormatOptions{Path: dev, Create: 16 << 20, Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(dev, blockdev.FileOptions{}) }}); err != nil {
		fmt.Println(err)
		return
	}

	n, err := node.Start(context.Background(), node.Config{
		Name:     "example",
		Devices:  []string{dev},
		Listen:   "127.0.0.1:0",
		Cluster:  cluster.Config{Cluster: "none"}, // alone
		Eviction: node.EvictLRU,
		RESP:     &node.RESPConfig{Listen: "127.0.0.1:0"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()

	c, err := net.Dial("tcp", n.RESPAddr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	r := bufio.NewReader(c)
	key := "llama@00000000@0@00c0ffee@tenant-a" // LMCache's native spelling
	fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nhello\r\n", len(key), key)
	line, _ := r.ReadString('\n')
	fmt.Printf("SET: %q\n", line)
	fmt.Fprintf(c, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	head, _ := r.ReadString('\n')
	body, _ := r.ReadString('\n')
	fmt.Printf("GET: %q %q\n", head, body)
	fmt.Println("slots used:", n.Usage().SlotsUsed)
	// Output:
	// SET: "+OK\r\n"
	// GET: "$5\r\n" "hello\r\n"
	// slots used: 1
}
