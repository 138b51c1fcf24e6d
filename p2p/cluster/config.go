package cluster

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing picks the failure detector's and the publisher's intervals.
type Timing int

const (
	// TimingLAN is memberlist's LAN profile (1 s probes, 30 s push-pull) with 1 s filter
	// publishing: a dead node leaves the live set in about half a minute.
	TimingLAN Timing = iota
	// TimingFast probes every 200 ms and syncs every second, for tests and demos on one
	// machine; it costs about ten times TimingLAN's gossip.
	TimingFast
)

// Config describes one member. Zero values take the defaults named on each field.
type Config struct {
	Name    string // node name, unique in the cluster, 1–64 of [A-Za-z0-9._-]; required
	Cluster string // cluster name: memberlist label and registry subdirectory; "default"

	BindAddr      string // gossip address to listen on; "127.0.0.1"
	BindPort      int    // gossip port (UDP and TCP); 0 lets the kernel pick
	AdvertiseAddr string // gossip address others use; BindAddr
	AdvertisePort int    // gossip port others use; the bound port

	Control string // advertised host:port of the node's control plane (node meta)
	Data    string // advertised host:port of the node's data plane (node meta)

	// Seeds are gossip addresses (host:port) of members to join. Without seeds the node
	// finds the others through the registry directory.
	Seeds []string
	// RegistryDir holds one file per node of a cluster on this machine (see registry.go);
	// "" is DefaultRegistryDir(Cluster). Used only when Seeds is empty.
	RegistryDir string
	// NoRegistry turns the registry off: a node without seeds then starts alone.
	NoRegistry bool

	Timing Timing

	ExpectedKeys  int     // keys the local filter is sized for; 1<<20
	FalsePositive float64 // target false-positive rate at ExpectedKeys; 0.01
	// MaxRemoteFilter caps the bytes of a peer's filter this node accepts; 16 MiB
	// (a filter for about 14 million keys at 1 %).
	MaxRemoteFilter int

	// PublishInterval is how often local changes are gossiped; the Timing's default.
	PublishInterval time.Duration
	// ReconnectInterval is how often failed members, seeds and registry entries are
	// joined again; the Timing's default.
	ReconnectInterval time.Duration
	// ReconnectFor is how long a failed member is retried; 1 h.
	ReconnectFor time.Duration

	Dial      DialFunc // dials memberlist's TCP streams; net.DialTimeout
	SecretKey []byte   // 16, 24 or 32 bytes: encrypt gossip (AES-GCM); none
	// GossipKeys encrypt gossip (AES-GCM) with the first and accept every one (key
	// rotation; ParseKeys reads them from a file); none: SecretKey's choice.
	GossipKeys [][]byte
	Logger     *log.Logger
	// Events receives membership changes: joins, leaves, members declared dead or
	// suspected, name conflicts, seeds that did not answer (explain.go); nil: none. Without
	// a Logger, memberlist's warnings go here too.
	Events *slog.Logger

	loggerDefaulted bool
	ring            *memberlist.Keyring
}

const (
	defaultCluster         = "default"
	defaultExpectedKeys    = 1 << 20
	defaultFalsePositive   = 0.01
	defaultMaxRemoteFilter = 16 << 20
)

// withDefaults returns the config with its zero values filled and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if !validName(c.Name) {
		return c, fmt.Errorf("node name %q is not 1–64 bytes of letters, digits, '.', '_', '-'", c.Name)
	}
	if c.Cluster == "" {
		c.Cluster = defaultCluster
	}
	if !validName(c.Cluster) {
		return c, fmt.Errorf("cluster name %q is not 1–64 bytes of letters, digits, '.', '_', '-'", c.Cluster)
	}
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1"
	}
	if c.BindPort < 0 || c.BindPort > 65535 || c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		return c, fmt.Errorf("gossip port %d/%d is outside 0–65535", c.BindPort, c.AdvertisePort)
	}
	if c.ExpectedKeys == 0 {
		c.ExpectedKeys = defaultExpectedKeys
	}
	if c.FalsePositive == 0 {
		c.FalsePositive = defaultFalsePositive
	}
	if c.MaxRemoteFilter == 0 {
		c.MaxRemoteFilter = defaultMaxRemoteFilter
	}
	if c.MaxRemoteFilter < 8 {
		return c, fmt.Errorf("remote filter cap %d bytes is below 8", c.MaxRemoteFilter)
	}
	switch c.Timing {
	case TimingLAN:
		c.PublishInterval = or(c.PublishInterval, time.Second)
		c.ReconnectInterval = or(c.ReconnectInterval, 10*time.Second)
	case TimingFast:
		c.PublishInterval = or(c.PublishInterval, 50*time.Millisecond)
		c.ReconnectInterval = or(c.ReconnectInterval, 500*time.Millisecond)
	default:
		return c, fmt.Errorf("timing %d is neither TimingLAN nor TimingFast", c.Timing)
	}
	c.ReconnectFor = or(c.ReconnectFor, time.Hour)
	ring, err := c.keyring()
	if err != nil {
		return c, err
	}
	c.ring = ring
	for _, a := range []string{c.Control, c.Data} {
		if err := checkAddr(a); err != nil {
			return c, err
		}
	}
	if c.Logger == nil {
		c.Logger = log.New(io.Discard, "", 0)
		c.loggerDefaulted = true
	}
	return c, nil
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// memberlistConfig is the memberlist configuration for c's timing.
func (c Config) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	if c.Timing == TimingFast {
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.SuspicionMult = 3
		mc.SuspicionMaxTimeoutMult = 3
		mc.GossipInterval = 50 * time.Millisecond
		mc.PushPullInterval = time.Second
		mc.TCPTimeout = time.Second
		mc.GossipToTheDeadTime = 2 * time.Second
		mc.DeadNodeReclaimTime = time.Second
	} else {
		// A node restarted on another port takes its name back after this long.
		mc.DeadNodeReclaimTime = 30 * time.Second
	}
	mc.Name = c.Name
	mc.Label = "rbctl." + c.Cluster
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	mc.SecretKey = c.SecretKey
	mc.Keyring = c.ring
	mc.Logger = c.Logger
	mc.LogOutput = nil
	return mc
}

// failureBound is how long a dead member of an n-node cluster stays in the live set at
// most, with memberlist's timers at nominal speed: a probe reaches it within n-1 probe
// intervals, the probe times out, the suspicion runs its longest (no confirmations), and
// gossip spreads the verdict. Memberlist's awareness stretches probes on an overloaded
// node by up to 8×; that is outside the bound.
func failureBound(mc *memberlist.Config, n int) time.Duration {
	if n < 2 {
		n = 2
	}
	probes := time.Duration(n-1)*mc.ProbeInterval + mc.ProbeTimeout
	scale := math.Max(1, math.Log10(float64(n)))
	suspicion := time.Duration(float64(mc.SuspicionMaxTimeoutMult*mc.SuspicionMult) * scale * float64(mc.ProbeInterval))
	return probes + suspicion + 2*mc.GossipInterval
}
