package nvmetcp

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// Defaults of a Config.
const (
	DefaultMaxIOQueues      = 8
	DefaultQueueSize        = 128  // entries per submission queue (CAP.MQES+1, MAXCMD)
	DefaultInlineData       = 8192 // in-capsule data bytes per I/O command capsule
	DefaultWriteBudget      = 256 << 20
	DefaultMaxConnections   = 256
	DefaultMaxControllers   = 16
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultStallTimeout     = 30 * time.Second
	DefaultKeepAliveSlack   = 10 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute

	adminInlineData = 8192             // what the Linux host assumes for the admin queue (NVME_TCP_ADMIN_CCSZ)
	maxTransferCap  = 1 << maxBufShift // the most data one command moves when the backend sets no lower MDTS
	aerLimit        = 4                // outstanding Asynchronous Event Requests (AERL+1)
	kasUnits        = 10               // KAS: keep-alive granularity in 100 ms units = 1 s
	maxNamespaces   = 1024             // namespaces whose LBA size the target learns (checks data lengths)
)

// Config describes a target. Zero values take the defaults above.
type Config struct {
	// NQN is the subsystem NQN hosts connect to (nqn.YYYY-MM.reverse.domain:...).
	NQN string
	// Backend answers the NVMe commands: admin commands the target does not answer itself,
	// and every I/O command. The target does not close it.
	Backend nvme.Transport
	// MaxIOQueues is the most I/O queues a controller grants (Set Features Number of Queues).
	MaxIOQueues int
	// QueueSize is the largest submission queue (entries) a Connect may ask for.
	QueueSize int
	// InlineData is the in-capsule data an I/O command capsule may carry (IOCCSZ).
	InlineData int
	// WriteBudget bounds the write data the target buffers at once over all its
	// connections: an R2T reserves its length first and waits while the budget is spent.
	// It must hold the largest transfer (MDTS).
	WriteBudget int64
	// MaxConnections is the most TCP connections served at once; more are closed at accept.
	MaxConnections int
	// MaxControllers is the most controllers (admin queues) at once; another admin Connect
	// completes with Connect Controller Busy.
	MaxControllers int
	// HandshakeTimeout: a connection that has not completed ICReq and Connect this long
	// after accept is closed.
	HandshakeTimeout time.Duration
	// StallTimeout: a PDU the host started sending, a transfer the target asked for with an
	// R2T, and a response the host does not read must make progress within it, or the
	// connection is closed (and its budget returned).
	StallTimeout time.Duration
	// KeepAliveSlack is added to the host's Keep Alive Timeout (KATO) before a controller
	// that received no Keep Alive is ended: hosts under emulation (QEMU TCG) can be late.
	KeepAliveSlack time.Duration
	// IdleTimeout ends a controller whose host turned keep-alive off (KATO 0) after this
	// long without a command on any of its queues.
	IdleTimeout time.Duration
	// Logf, when set, receives one line per connection event.
	Logf func(format string, a ...any)
}

// ErrConfig: the target configuration is unusable.
var ErrConfig = errors.New("nvmetcp: invalid target configuration")

// Target is an NVMe/TCP target for one NVM subsystem with a dynamic controller model: each
// admin queue Connect creates a controller, whose I/O queues connect by its controller ID.
type Target struct {
	cfg     Config
	vs      uint32 // VS property: the backend's Identify VER
	nn      uint32 // namespaces of the backend
	mdts    uint8  // MDTS the target advertises and enforces
	maxData uint32 // largest data transfer of one command: 4 KiB << mdts
	elpe    uint8  // error log entries - 1
	serial  string
	lbaSize map[uint32]uint32 // NSID → bytes per logical block (data + inline metadata)
	budget  *budget

	mu     sync.Mutex
	ctrls  map[uint16]*controller
	nextID uint16
	conns  map[net.Conn]struct{}
	lns    []net.Listener
	closed bool
	wg     sync.WaitGroup

	counts counters
}

// controller is the state of one host controller association.
type controller struct {
	id      uint16
	hostNQN string
	hostID  [16]byte

	mu      sync.Mutex
	cc      uint32
	csts    uint32
	katoMs  uint32
	nrIOQ   int    // I/O queues granted; 0 until Set Features Number of Queues
	aecfg   uint32 // Asynchronous Event Configuration as the host set it
	queues  map[uint16]*queue
	dropped bool
	watch   *time.Timer // ends the controller when keep-alive (or, KATO 0, any command) stops

	lastKeepAlive atomic.Int64 // unix ns of the last Keep Alive (or the Connect)
	lastCommand   atomic.Int64 // unix ns of the last command on any of its queues
}

// New checks cfg, reads the backend's Identify Controller data once (for VS, MDTS and the
// namespace count) and each namespace's LBA size, and returns a target that is not yet
// listening.
func New(cfg Config) (*Target, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("%w: no backend", ErrConfig)
	}
	if err := CheckNQN(cfg.NQN); err != nil {
		return nil, err
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxIOQueues, DefaultMaxIOQueues)
	def(&cfg.QueueSize, DefaultQueueSize)
	def(&cfg.InlineData, DefaultInlineData)
	def(&cfg.MaxConnections, DefaultMaxConnections)
	def(&cfg.MaxControllers, DefaultMaxControllers)
	defDur(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	defDur(&cfg.StallTimeout, DefaultStallTimeout)
	defDur(&cfg.KeepAliveSlack, DefaultKeepAliveSlack)
	defDur(&cfg.IdleTimeout, DefaultIdleTimeout)
	if cfg.WriteBudget <= 0 {
		cfg.WriteBudget = DefaultWriteBudget
	}
	if cfg.QueueSize < 2 || cfg.QueueSize > 1024 || cfg.MaxIOQueues > 128 {
		return nil, fmt.Errorf("%w: queue size %d (want 2..1024) or %d I/O queues (want ≤ 128)", ErrConfig, cfg.QueueSize, cfg.MaxIOQueues)
	}
	if cfg.InlineData%16 != 0 || cfg.InlineData > 1<<20 {
		return nil, fmt.Errorf("%w: in-capsule data %d bytes (want a multiple of 16 up to 1 MiB)", ErrConfig, cfg.InlineData)
	}
	if cfg.MaxControllers > 0xFFEF {
		return nil, fmt.Errorf("%w: %d controllers (want ≤ %d, the controller IDs there are)", ErrConfig, cfg.MaxControllers, 0xFFEF)
	}
	id := make([]byte, nvme.IdentifyDataLen)
	c := cfg.Backend.Admin(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSController), Data: id, BufIndex: -1})
	if c.Err != nil || !c.Status.OK() {
		return nil, fmt.Errorf("nvmetcp: Identify Controller on the backend: %v %v", c.Status, c.Err)
	}
	cd, err := nvme.DecodeController(id)
	if err != nil {
		return nil, fmt.Errorf("nvmetcp: backend Identify Controller: %w", err)
	}
	t := &Target{cfg: cfg, vs: cd.VER, nn: cd.NN, elpe: cd.ELPE, serial: cd.SerialNumber,
		ctrls: map[uint16]*controller{}, nextID: 1, conns: map[net.Conn]struct{}{}}
	if t.vs == 0 {
		t.vs = 0x00010300
	}
	// The target enforces (and advertises as MDTS) the backend's limit, or 1 MiB when the
	// backend sets none or a larger one: a write is refused before its R2T, not after.
	t.maxData = maxTransferCap
	if m := cd.MaxTransfer(nvme.DefaultMinPageSize); m > 0 && m < maxTransferCap {
		t.maxData = uint32(m)
	}
	t.mdts = uint8(bits.TrailingZeros32(t.maxData / nvme.DefaultMinPageSize))
	if cfg.WriteBudget < int64(t.maxData) {
		return nil, fmt.Errorf("%w: write budget %d bytes is below one transfer of %d bytes (MDTS)", ErrConfig, cfg.WriteBudget, t.maxData)
	}
	t.budget = newBudget(cfg.WriteBudget)
	t.lbaSize = learnLBASizes(cfg.Backend, cd.NN)
	return t, nil
}

// learnLBASizes reads Identify Namespace for the first namespaces: with the LBA size the
// target checks a Read's or Write's data length against its block count before it moves
// any data. Namespaces it cannot identify are left to the backend.
func learnLBASizes(b nvme.Transport, nn uint32) map[uint32]uint32 {
	sizes := map[uint32]uint32{}
	buf := make([]byte, nvme.IdentifyDataLen)
	for nsid := uint32(1); nsid <= min(nn, maxNamespaces); nsid++ {
		c := b.Admin(&nvme.Command{Opcode: nvme.OpIdentify, NSID: nsid, CDW10: uint32(nvme.CNSNamespace), Data: buf, BufIndex: -1})
		if c.Err != nil || !c.Status.OK() {
			continue
		}
		ns, err := nvme.DecodeNamespace(buf)
		if err != nil || ns.NSZE == 0 {
			continue
		}
		f, err := ns.Format()
		if err != nil {
			continue
		}
		n := uint32(f.DataSize())
		if ns.ExtendedLBA() {
			n += uint32(f.MS)
		}
		sizes[nsid] = n
	}
	return sizes
}

// CheckNQN checks the form of an NVMe Qualified Name: "nqn.yyyy-mm.reverse-domain:..." or
// the UUID form, at most 223 bytes.
func CheckNQN(nqn string) error {
	if len(nqn) == 0 || len(nqn) > 223 {
		return fmt.Errorf("%w: NQN %q must be 1..223 bytes", ErrConfig, nqn)
	}
	if !strings.HasPrefix(nqn, "nqn.") || len(nqn) < 12 || nqn[8] != '-' {
		return fmt.Errorf("%w: NQN %q must look like nqn.2014-08.org.example:name", ErrConfig, nqn)
	}
	return nil
}

func (t *Target) logf(format string, a ...any) {
	if t.cfg.Logf != nil {
		t.cfg.Logf(format, a...)
	}
}

// Serve accepts connections on ln until ln or the target is closed; each connection is one
// queue served by its own goroutine.
func (t *Target) Serve(ln net.Listener) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return net.ErrClosed
	}
	t.lns = append(t.lns, ln)
	t.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		t.ServeConn(c)
	}
}

// ServeConn serves one queue connection in a new goroutine. Beyond MaxConnections the
// connection is closed at once.
func (t *Target) ServeConn(c net.Conn) {
	t.mu.Lock()
	if t.closed || len(t.conns) >= t.cfg.MaxConnections {
		closed := t.closed
		t.mu.Unlock()
		c.Close()
		if !closed {
			t.counts.refused.Add(1)
			t.logf("nvmetcp: %s: refused: %d connections open (the connection limit)", c.RemoteAddr(), t.cfg.MaxConnections)
		}
		return
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	t.counts.accepted.Add(1)
	go func() {
		defer t.wg.Done()
		q := newQueue(t, c)
		err := q.serve()
		q.end()
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		t.logf("nvmetcp: %s: queue %d of controller %d closed: %v", c.RemoteAddr(), q.qid, q.ctrlID(), err)
	}()
}

// Close stops the listeners, closes every connection and waits for their goroutines.
func (t *Target) Close() error {
	t.mu.Lock()
	t.closed = true
	for _, ln := range t.lns {
		ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// Controllers returns the number of live controllers (admin queues connected).
func (t *Target) Controllers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ctrls)
}

// Stats is a snapshot of a target's connections, buffered write data and the defences that
// fired since it started.
type Stats struct {
	Connections int // open TCP connections
	Controllers int
	// WriteBuffered is the write data reserved by R2Ts not yet completed (budget in use);
	// WriteBufferedPeak its highest value; WriteAllocated the part whose data has started to
	// arrive (buffers allocated); R2TWaiting the writes waiting for budget.
	WriteBuffered, WriteBufferedPeak, WriteAllocated int64
	R2TWaiting                                       int

	Accepted          int64 // connections served
	Refused           int64 // connections closed at accept (MaxConnections)
	ControllersBusy   int64 // admin Connects refused (MaxControllers)
	HandshakeTimeouts int64 // connections closed before finishing ICReq and Connect
	Stalls            int64 // connections closed for a stalled PDU, transfer or response
	KeepAliveExpired  int64 // controllers ended by the keep-alive or idle timer
	TermReqs          int64 // C2HTermReqs sent for malformed PDUs
	R2TWaited         int64 // writes whose R2T had to wait for budget
	Rejected          int64 // commands refused before any data moved (MDTS, IOCCSZ, lengths)
}

type counters struct {
	accepted, refused, busy, handshake, stalls, keepAlive, termReqs, rejected atomic.Int64
	allocated, waiting, waited                                                atomic.Int64
}

// Stats returns the target's current figures.
func (t *Target) Stats() Stats {
	t.mu.Lock()
	s := Stats{Connections: len(t.conns), Controllers: len(t.ctrls)}
	t.mu.Unlock()
	s.WriteBuffered, s.WriteBufferedPeak, s.R2TWaiting = t.budget.inUse(), t.budget.peak.Load(), int(t.counts.waiting.Load())
	s.WriteAllocated = t.counts.allocated.Load()
	s.Accepted, s.Refused, s.ControllersBusy = t.counts.accepted.Load(), t.counts.refused.Load(), t.counts.busy.Load()
	s.HandshakeTimeouts, s.Stalls, s.KeepAliveExpired = t.counts.handshake.Load(), t.counts.stalls.Load(), t.counts.keepAlive.Load()
	s.TermReqs, s.Rejected, s.R2TWaited = t.counts.termReqs.Load(), t.counts.rejected.Load(), t.counts.waited.Load()
	return s
}

// newController allocates a controller ID (1..0xFFEF) for an admin queue Connect, and starts
// its keep-alive watch; beyond MaxControllers it fails with errBusy.
func (t *Target) newController(d ConnectData, katoMs uint32, admin *queue) (*controller, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ctrls) >= t.cfg.MaxControllers {
		return nil, errBusy
	}
	for range 0xFFEF {
		id := t.nextID
		t.nextID++
		if t.nextID > 0xFFEF {
			t.nextID = 1
		}
		if _, used := t.ctrls[id]; !used {
			c := &controller{id: id, hostNQN: d.HostNQN, hostID: d.HostID, katoMs: katoMs, queues: map[uint16]*queue{0: admin}}
			now := time.Now().UnixNano()
			c.lastKeepAlive.Store(now)
			c.lastCommand.Store(now)
			c.watch = time.AfterFunc(t.aliveFor(katoMs), func() { t.checkAlive(c) })
			t.ctrls[id] = c
			return c, nil
		}
	}
	return nil, errBusy
}

var errBusy = errors.New("nvmetcp: no controller available")

// aliveFor is how long a controller lives without a Keep Alive (KATO + slack) or, with
// keep-alive off, without any command.
func (t *Target) aliveFor(katoMs uint32) time.Duration {
	if katoMs == 0 {
		return t.cfg.IdleTimeout
	}
	return time.Duration(katoMs)*time.Millisecond + t.cfg.KeepAliveSlack
}

// checkAlive runs when a controller's watch fires: it ends the controller (by closing its
// admin queue, which takes the I/O queues with it) if its host fell silent, else re-arms.
func (t *Target) checkAlive(c *controller) {
	c.mu.Lock()
	if c.dropped {
		c.mu.Unlock()
		return
	}
	life := t.aliveFor(c.katoMs)
	last := c.lastKeepAlive.Load()
	if c.katoMs == 0 {
		last = c.lastCommand.Load()
	}
	left := time.Until(time.Unix(0, last).Add(life))
	if left > 0 {
		c.watch.Reset(left)
		c.mu.Unlock()
		return
	}
	admin := c.queues[0]
	kato := c.katoMs
	c.mu.Unlock()
	t.counts.keepAlive.Add(1)
	why := fmt.Errorf("%w: no Keep Alive for %v (KATO %d ms + slack)", ErrKeepAlive, life, kato)
	if kato == 0 {
		why = fmt.Errorf("%w: no command for %v (KATO 0: the idle limit)", ErrKeepAlive, life)
	}
	t.logf("nvmetcp: controller %d: %v: ending it", c.id, why)
	if admin != nil {
		admin.kill(why)
	}
}

func (t *Target) controller(id uint16) *controller {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctrls[id]
}

// dropController removes a controller whose admin queue went away and closes its I/O queues.
func (t *Target) dropController(c *controller) {
	t.mu.Lock()
	if t.ctrls[c.id] == c {
		delete(t.ctrls, c.id)
	}
	t.mu.Unlock()
	c.mu.Lock()
	c.dropped = true
	c.watch.Stop()
	qs := make([]*queue, 0, len(c.queues))
	for qid, q := range c.queues {
		if qid != 0 {
			qs = append(qs, q)
		}
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.kill(errAdminGone)
	}
}

// capProperty is CAP: MQES, CQR=1, TO, CSS bit 0 (NVM command set), MPSMIN=MPSMAX=0 (4 KiB).
func (t *Target) capProperty() uint64 {
	const timeout = 15 // × 500 ms until CSTS.RDY follows CC.EN
	return uint64(t.cfg.QueueSize-1) | 1<<16 | timeout<<24 | 1<<37
}

// ErrNotLoopback: a listen address would expose the target beyond this machine.
var ErrNotLoopback = errors.New("nvmetcp: listen address is not loopback")

// CheckListen accepts a HOST:PORT listen address only when every address HOST names is a
// loopback address, unless allowRemote: the target has no authentication.
func CheckListen(listen string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w (want HOST:PORT, e.g. 127.0.0.1:4420)", listen, err)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("%w: %q listens on every interface and the target has no authentication", ErrNotLoopback, listen)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", listen, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w: %s reaches %s and the target has no authentication", ErrNotLoopback, listen, ip)
		}
	}
	return nil
}
