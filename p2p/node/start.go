package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// TLSPoll is how often a node Start built looks for changed certificate files.
const TLSPoll = 5 * time.Second

// A ConfigError is a Config that Start refuses, before anything opens. Msg names fields
// as {Field} ({RESP.Listen} for a nested one): Error spells them as the Config's fields,
// Render as a caller's names for them (rbctl's flags).
type ConfigError struct {
	Msg string
	err error // what it wraps, if anything (Unwrap)
}

func (e *ConfigError) Unwrap() error { return e.err }

var fieldRef = regexp.MustCompile(`\{([A-Za-z.]+)\}`)

func (e *ConfigError) Error() string { return "node: " + e.Render(func(f string) string { return f }) }

// Render spells each {Field} of Msg as name(Field).
func (e *ConfigError) Render(name func(field string) string) string {
	return fieldRef.ReplaceAllStringFunc(e.Msg, func(m string) string { return name(m[1 : len(m)-1]) })
}

func refuse(format string, a ...any) error { return &ConfigError{Msg: fmt.Sprintf(format, a...)} }

// Check validates what Start alone uses, as Start does first, before any file or device is
// opened (New checks the rest, after the files are loaded); a caller that wants to say
// something before the node starts can check first.
func (c *Config) Check() error {
	if len(c.Devices) == 0 {
		return refuse("{Devices}: no device given")
	}
	// The same storage under two spellings (a link, a relative path, /dev/ngXnY and its
	// block device) would otherwise meet its own lock and blame this very process.
	if err := devices.Distinct(c.Devices); err != nil {
		return err
	}
	if c.CheckpointInterval < 0 {
		return refuse("{CheckpointInterval} %v: must be positive", c.CheckpointInterval)
	}
	ev, err := ParseEviction(string(c.Eviction))
	if err != nil {
		return refuse("{Eviction}: %v", err)
	}
	c.Eviction = ev
	if c.Deallocate, err = ParseDeallocation(string(c.Deallocate)); err != nil {
		return refuse("{Deallocate}: %v", err)
	}
	if err := CheckAdmission(c.Admission); err != nil {
		return refuse("{Admission}: %v", err)
	}
	if c.RegionBytes != 0 && ev != EvictRegion {
		return refuse("{RegionBytes} is for {Eviction} region, not %s", c.Eviction)
	}
	for _, a := range []struct{ field, v string }{{"MetricsListen", c.MetricsListen}, {"Listen", c.Listen}, {"DataListen", c.DataListen}} {
		if a.v != "" {
			if err := checkListenAddr(a.v); err != nil {
				return refuse("{%s} %q: %v", a.field, a.v, err)
			}
		}
	}
	if c.RESP != nil {
		if err := checkListenAddr(c.RESP.Listen); err != nil {
			return refuse("{RESP.Listen} %q: %v", c.RESP.Listen, err)
		}
	}
	for _, a := range c.Cluster.Seeds {
		if err := checkDialAddr(strings.TrimSpace(a)); err != nil {
			return refuse("{Cluster.Seeds} %q: %v (a seed is a member's gossip address, HOST:PORT)", a, err)
		}
	}
	for _, p := range c.Peers {
		ctl, data, hasData := strings.Cut(strings.TrimSpace(p), "/")
		err := checkDialAddr(ctl)
		if err == nil && hasData {
			err = checkDialAddr(data)
		}
		if err != nil {
			return refuse("{Peers} %q: %v (a peer is CONTROL or CONTROL/DATA, each HOST:PORT)", p, err)
		}
	}
	if r := c.Record; r != nil {
		if r.MaxBytes < 4096 {
			return refuse("{Record.MaxBytes} %d: at least 4096", r.MaxBytes)
		}
		if r.MaxFiles < 0 {
			return refuse("{Record.MaxFiles} %d: must not be negative", r.MaxFiles)
		}
		if st, err := os.Stat(filepath.Dir(r.Path)); err != nil || !st.IsDir() {
			return refuse("{Record.Path} %s: its directory does not exist", r.Path)
		}
	}
	if err := c.TLSFiles.CheckServer(); err != nil {
		return refuse("{TLSFiles.Cert}, {TLSFiles.Key} and {TLSFiles.CA} go together; only %s given", c.tlsGiven())
	}
	if a := c.Advertise; a != "" {
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" || p == "0" {
			return refuse("{Advertise} %q: want HOST:PORT with a host and a port", a)
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return refuse("{Advertise} %q: %s is no address a peer can dial", a, h)
		}
	}
	if l := c.Limits; l.MaxLeases > 0 && l.MaxLeasesPerClient > l.MaxLeases {
		return refuse("{Limits.MaxLeasesPerClient} %d is above {Limits.MaxLeases} %d", l.MaxLeasesPerClient, l.MaxLeases)
	}
	if c.GossipKeyFile != "" && (len(c.Peers) > 0 || c.Cluster.Cluster == "none") {
		return refuse("{GossipKeyFile} encrypts cluster gossip; with {Peers} or {Cluster.Cluster} none there is none")
	}
	return nil
}

// checkListenAddr checks an address to listen on: HOST:PORT (the host may be empty: every
// address), the port a number from 0 (any free port) to 65535 or a service name.
func checkListenAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	return checkPort(port)
}

// checkDialAddr checks an address to dial: HOST:PORT with a host and a port other than 0.
func checkDialAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	switch {
	case err != nil:
		return errors.New("want HOST:PORT")
	case host == "" || strings.ContainsAny(host, " \t"):
		return fmt.Errorf("%q is no host to dial", host)
	case port == "0":
		return errors.New("port 0 cannot be dialled")
	}
	return checkPort(port)
}

// checkPort accepts a port number from 0 to 65535 or a name the services database knows.
func checkPort(port string) error {
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("port %d is out of range (0 to 65535)", n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number nor a known service", port)
	}
	return nil
}

// tlsGiven names the TLS files given, for a message.
func (c *Config) tlsGiven() string {
	var g []string
	for _, s := range []struct{ name, v string }{{"{TLSFiles.Cert}", c.TLSFiles.Cert}, {"{TLSFiles.Key}", c.TLSFiles.Key}, {"{TLSFiles.CA}", c.TLSFiles.CA}} {
		if s.v != "" {
			g = append(g, s.name)
		}
	}
	s := ""
	for i, n := range g {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// joins says whether the node joins a gossip cluster: no fixed peers, and a cluster named
// (not "none") or seeds given.
func (c *Config) joins() bool {
	return len(c.Peers) == 0 && c.Cluster.Cluster != "none" && (c.Cluster.Cluster != "" || len(c.Cluster.Seeds) > 0)
}

// Start builds a node from cfg and serves it: it checks cfg, loads the TLS, token and gossip
// key files, opens every device (cache.Open with cfg.Open, checkpointing every
// CheckpointInterval) as one sharded cache, opens the recording, listens on both planes,
// takes the fixed peers or joins the cluster, and starts the metrics listener and the RESP
// front end. It returns once all of them serve, or the first error with everything it
// opened closed again. ctx bounds the start and the node's background work (peer fetches
// for RESP clients, certificate reloads); Close stops the node and writes the final
// checkpoint.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	log := cfg.Logger
	var undo []func() // what is open, closed again in reverse when Start fails
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	undo = append(undo, cancel)
	reload, err := cfg.loadFiles(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range cfg.Devices {
		if w := cache.SpaceWarning(d); w != "" {
			log.Warn(w)
		}
	}
	c, err := cfg.openCache()
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { c.CloseNoCheckpoint() })
	cfg.name()
	if cfg.Record != nil {
		if cfg.Recorder, err = cfg.startRecorder(c); err != nil {
			return nil, err
		}
		undo = append(undo, func() { cfg.Recorder.Close() })
	}
	ctl, dl, err := cfg.listen(ctx)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { ctl.Close(); dl.Close() })
	leave, err := cfg.meet(ctx, ctl, dl)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { leave.Close() })
	n, err := NewSharded(c, cfg)
	if err != nil {
		return nil, err
	}
	n.Serve(ctl, dl)
	n.cancel, n.reload = cancel, reload
	n.after = []func() error{leave.Close, c.Close}
	if cfg.Recorder != nil {
		n.after = append(n.after, cfg.Recorder.Close)
	}
	undo = []func(){func() { n.Close() }} // from here Close undoes everything
	if cfg.MetricsListen != "" {
		stop, err := n.serveMetrics(ctx, cfg.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
		n.stops = append(n.stops, stop)
	}
	if cfg.RESP != nil {
		addr, stop, err := n.serveRESP(ctx, *cfg.RESP)
		if err != nil {
			return nil, err
		}
		n.respAddr = addr
		n.stops = append(n.stops, stop)
	}
	return n, nil
}

// loadFiles reads the TLS material (watched for changes until ctx ends; the returned
// channel asks for a reload now), the token file, the peer token and the gossip keys into
// c's loaded fields.
func (c *Config) loadFiles(ctx context.Context) (chan<- os.Signal, error) {
	log := c.Logger
	var reload chan os.Signal
	if !c.TLSFiles.Empty() {
		m, err := secure.Load(c.TLSFiles, log)
		if err == nil {
			err = m.CheckNodeUsage()
		}
		if err != nil {
			return nil, fmt.Errorf("TLS: %v", err) // %v: a missing file is bad input, not a missing key
		}
		reload = make(chan os.Signal, 1)
		go m.Watch(ctx, TLSPoll, reload)
		c.TLS = m
	}
	if c.AuthFile != "" {
		ts, warn, err := auth.Load(c.AuthFile)
		if err != nil {
			return nil, refuse("{AuthFile}: %v", err)
		}
		if warn != "" {
			log.Warn(warn)
		}
		c.Tokens = ts
		log.Info("access control: tokens checked on the control plane and RESP", "tokens", ts.Len())
	}
	if c.PeerTokenFile != "" {
		s, warn, err := auth.ReadSecret(c.PeerTokenFile)
		if err != nil {
			return nil, refuse("{PeerTokenFile}: %v", err)
		}
		if warn != "" {
			log.Warn(warn)
		}
		c.PeerToken = s
	}
	if c.GossipKeyFile != "" {
		r, err := os.Open(c.GossipKeyFile)
		if err != nil {
			return nil, refuse("{GossipKeyFile}: %v", err)
		}
		defer r.Close()
		if st, err := r.Stat(); err == nil && st.Mode().Perm()&0o044 != 0 {
			log.Warn("gossip key file readable by others than its owner (chmod 600)", "file", c.GossipKeyFile, "mode", fmt.Sprintf("%04o", st.Mode().Perm()))
		}
		keys, err := cluster.ParseKeys(io.LimitReader(r, 1<<20))
		if err != nil {
			return nil, refuse("{GossipKeyFile} %s: %v", c.GossipKeyFile, err)
		}
		c.Cluster.GossipKeys = keys
	}
	return reload, nil
}

// openCache opens c.Devices (cache.Open with c.Open, periodic checkpoints and, with
// c.Deallocate, deallocation of freed slots) as one cache
// routed by c.ShardBy; devices whose keys belong elsewhere are refused (sharded.ErrMisrouted)
// unless AllowMisrouted. It sets RegionSlots from RegionBytes and the slot size.
func (c *Config) openCache() (*sharded.Cache, error) {
	interval := c.CheckpointInterval
	if interval == 0 {
		interval = 10 * time.Second
	}
	o := c.Open
	tweak := o.Tweak
	o.Tweak = func(dev blockdev.Device, cfg *engine.Config) {
		if tweak != nil {
			tweak(dev, cfg)
		}
		// Checkpoints every interval, forced (idle or not) once the oldest unsaved change is
		// one interval old: an acknowledged write is in a checkpoint at most 2 intervals +
		// one checkpoint after it.
		cfg.Periodic, cfg.CheckpointInterval, cfg.ForceAfter = true, interval, interval
		cfg.IdleQuiet = min(cfg.IdleQuiet, interval/2)
		if c.Logger != nil && cfg.Progress == nil {
			c.Logger.Info("recovering cache", "device", dev.Info().Path, "io_engine", cmp.Or(devices.EngineOf(dev), "other"))
			cfg.Progress = recoveryProgress(c.Logger, dev.Info().Path, time.Now)
		}
		if c.Deallocate.On(dev.Info()) {
			cfg.DeallocateOnDelete = true
		} else if c.Deallocate != DeallocateNone && c.Logger != nil {
			c.Logger.Info("freed slots are not deallocated", "device", dev.Info().Path, "why", c.Deallocate.why(dev.Info()))
		}
	}
	if c.Logger != nil && o.Opened == nil {
		o.Opened = func(od *devices.Opened) { logOpened(c.Logger, od) }
	}
	engs := make([]*engine.Engine, 0, len(c.Devices))
	fail := func(err error) (*sharded.Cache, error) {
		for _, e := range engs {
			e.CloseNoCheckpoint()
		}
		return nil, err
	}
	for _, p := range c.Devices {
		e, err := cache.Open(p, o)
		if err != nil {
			return fail(err)
		}
		logRecovered(c.Logger, p, e.Stats().Recovery)
		engs = append(engs, e)
	}
	sc, err := sharded.New(engs, sharded.Config{Route: c.ShardBy})
	if err != nil {
		return fail(err)
	}
	if !c.AllowMisrouted {
		if err := sc.CheckRoutes(); err != nil {
			if errors.Is(err, sharded.ErrMisrouted) {
				err = &ConfigError{Msg: err.Error() + " ({AllowMisrouted} serves it anyway)", err: err}
			}
			return fail(err)
		}
	}
	if c.Eviction == EvictRegion {
		region := c.RegionBytes
		if region == 0 {
			region = 16 << 20
		}
		slot := engs[0].Config().SlotBytes
		if c.RegionSlots = int(region / slot); c.RegionSlots < 1 {
			return fail(refuse("{RegionBytes} %d: below one slot of %d bytes", region, slot))
		}
	}
	return sc, nil
}

// name gives the node the name it keeps across restarts when none is set: the cluster
// member's name, else one kept in the state directory for this device list
// (cluster.PersistentName).
func (c *Config) name() {
	if c.Name == "" {
		c.Name = c.Cluster.Name
	}
	if c.Name == "" {
		h, _ := os.Hostname()
		name, err := cluster.PersistentName(nameFile(c.Devices), h)
		if err != nil {
			c.Logger.Warn("node name not kept across restarts", "name", name, "err", err)
		}
		c.Name = name
	}
	c.Cluster.Name = c.Name
}

// nameFile is where the node name of a device list is kept: $XDG_STATE_HOME/rbctl/nodes/
// (else ~/.local/state/..., else /var/lib/rbctl/nodes/), one file per list of absolute paths.
func nameFile(devs []string) string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state")
		} else {
			dir = "/var/lib"
		}
	}
	h := sha256.New()
	for _, d := range devs {
		abs, _ := filepath.Abs(d)
		h.Write([]byte(abs + "\x00"))
	}
	return filepath.Join(dir, "rbctl", "nodes", hex.EncodeToString(h.Sum(nil))[:16])
}

// startRecorder opens the recording; its header records the cache's slots and slot size and
// the node's eviction and admission, so that a replay given no size flags uses them.
func (c *Config) startRecorder(sc *sharded.Cache) (*l2trace.Recorder, error) {
	u := sc.Usage()
	ev := string(c.Eviction)
	if ev == "" {
		ev = string(EvictNone)
	}
	adm := c.Admission
	if adm == "" {
		adm = "all"
	}
	h := l2trace.Header{Node: c.Name, Capacity: l2trace.Capacity{Slots: u.SlotsTotal, SlotBytes: sc.Shard(0).Layout().SlotBytes},
		Eviction: ev, Admission: adm, Software: "rbctl " + c.Version}
	rec, err := l2trace.New(*c.Record, h)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return rec, nil
}

// listen binds the control plane at Listen and the data plane at DataListen (default:
// Listen's host, any port).
func (c *Config) listen(ctx context.Context) (ctl, data net.Listener, err error) {
	listen := c.Listen
	if listen == "" {
		listen = "127.0.0.1:7470"
	}
	var lc net.ListenConfig
	if ctl, err = lc.Listen(ctx, "tcp", listen); err != nil {
		return nil, nil, err
	}
	dataListen := c.DataListen
	if dataListen == "" {
		h, _, _ := net.SplitHostPort(listen)
		dataListen = net.JoinHostPort(h, "0")
	}
	if data, err = lc.Listen(ctx, "tcp", dataListen); err != nil {
		ctl.Close()
		return nil, nil, err
	}
	return ctl, data, nil
}

// meet sets the Directory: the fixed Peers, or the cluster joined with the addresses peers
// must use, or none (the node serves alone). The returned Closer leaves the cluster.
func (c *Config) meet(ctx context.Context, ctl, data net.Listener) (io.Closer, error) {
	if len(c.Peers) > 0 {
		c.Directory = StaticPeers(c.Peers)
		return nopCloser{}, nil
	}
	if !c.joins() {
		return nopCloser{}, nil
	}
	cl := c.Cluster
	if cl.Cluster == "" {
		cl.Cluster = "default"
	}
	cl.Events = c.Logger
	if ip := net.ParseIP(cl.BindAddr); ip != nil && ip.IsUnspecified() && cl.AdvertiseAddr == "" {
		// Gossip listens on every address: others reach it at the outbound interface's
		// address, or the advertised host's.
		host, _, _ := net.SplitHostPort(Dialable(net.JoinHostPort(cl.BindAddr, "0")))
		if c.Advertise != "" {
			h, _, _ := net.SplitHostPort(c.Advertise)
			if ips, err := net.LookupIP(h); err == nil && len(ips) > 0 {
				host = ips[0].String()
			}
		}
		cl.AdvertiseAddr = host
	}
	self := p2p.Peer{Name: c.Name}
	self.Control, self.Data = advertise(ctl.Addr().String(), data.Addr().String(), c.Advertise)
	d, leave, err := cluster.JoinFunc(cl, 5*time.Second)(ctx, self)
	if err != nil {
		return nil, err
	}
	if m, ok := d.(*cluster.Cluster); ok {
		c.Logger.Info("joined cluster", "cluster", cl.Cluster, "members", len(m.Members()), "name", cl.Name)
	}
	c.Directory = d
	return leave, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// ReloadTLS re-reads the TLS files of a node Start built with TLSFiles now (they are also
// re-read when they change) and names them; "" when the node has none.
func (n *Node) ReloadTLS() string {
	if n.reload == nil {
		return ""
	}
	select {
	case n.reload <- syscall.SIGHUP:
	default: // one is pending
	}
	f := n.opts.TLSFiles
	return f.Cert + ", " + f.Key + ", " + f.CA
}

// RESPAddr is the address the RESP front end of a node Start built listens on ("": none).
func (n *Node) RESPAddr() string { return n.respAddr }

// MetricsAddr is the bound address of the node's /metrics listener ("" without
// Config.MetricsListen).
func (n *Node) MetricsAddr() string { return n.metricsAddr }
