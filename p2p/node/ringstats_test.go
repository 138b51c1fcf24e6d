package node

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// A node whose device runs io_uring rings reports where its batches spent their time
// (ring_batches, ring_queued_us, ring_run_us, ring_wake_us) in Stats and in the RESP INFO,
// the batches counting the GETs' reads; a node on a device without rings reports none of
// them rather than zeros it did not measure.
func TestRingStats(t *testing.T) {
	dev := formatFile(t, t.TempDir(), "a.img")
	cfg := startConfig(dev)
	cfg.RESP = &RESPConfig{Listen: "127.0.0.1:0"}
	n := startT(t, cfg)
	_, rings := n.cache.Shard(0).Device().(*blockdev.UringDevice)
	c, err := net.Dial("tcp", n.RESPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "m@00000000@0@0a0b@s"
	exchangeLine(t, c, cmd("SET", key, "v"), "+OK\r\n")
	before := n.Stats().Counters["ring_batches"]
	for range 3 {
		exchangeLine(t, c, cmd("GET", key), "$1\r\n")
		exchangeLine(t, c, "", "v\r\n")
	}
	st := n.Stats().Counters
	info := bulkReply(t, c, cmd("INFO"))
	names := []string{"ring_batches", "ring_queued_us", "ring_run_us", "ring_wake_us"}
	if !rings {
		for _, k := range names {
			if _, ok := st[k]; ok || strings.Contains(info, "rbctl_"+k+":") {
				t.Errorf("%s reported for a device without rings", k)
			}
		}
		t.Skipf("the device is %T, not io_uring: the counters' values are not checked", n.cache.Shard(0).Device())
	}
	if got := st["ring_batches"] - before; got < 3 {
		t.Errorf("3 GETs read the device in %d batches", got)
	}
	for _, k := range names {
		v, ok := st[k]
		if !ok || v < 0 {
			t.Errorf("Stats %s = %d, %v", k, v, ok)
		}
		line := ""
		for _, l := range strings.Split(info, "\r\n") {
			if x, ok := strings.CutPrefix(l, "rbctl_"+k+":"); ok {
				line = x
			}
		}
		if x, err := strconv.ParseInt(line, 10, 64); err != nil || x < v {
			t.Errorf("INFO rbctl_%s = %q, want a count of at least Stats' %d", k, line, v)
		}
	}
}
