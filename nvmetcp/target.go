package nvmetcp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// Defaults of a Config.
const (
	DefaultMaxIOQueues = 8
	DefaultQueueSize   = 128  // entries per submission queue (CAP.MQES+1, MAXCMD)
	DefaultInlineData  = 8192 // in-capsule data bytes per I/O command capsule
	adminInlineData    = 8192 // what the Linux host assumes for the admin queue (NVME_TCP_ADMIN_CCSZ)
	minMaxData         = 1 << 20
	aerLimit           = 4  // outstanding Asynchronous Event Requests (AERL+1)
	kasUnits           = 10 // KAS: keep-alive granularity in 100 ms units = 1 s
)

// Config describes a target.
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
	mdts    uint8
	maxData uint32 // largest data transfer of one command
	serial  string

	mu     sync.Mutex
	ctrls  map[uint16]*controller
	nextID uint16
	conns  map[net.Conn]struct{}
	lns    []net.Listener
	closed bool
	wg     sync.WaitGroup
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
}

// New checks cfg, reads the backend's Identify Controller data once (for VS, MDTS and the
// namespace count) and returns a target that is not yet listening.
func New(cfg Config) (*Target, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("%w: no backend", ErrConfig)
	}
	if err := CheckNQN(cfg.NQN); err != nil {
		return nil, err
	}
	if cfg.MaxIOQueues <= 0 {
		cfg.MaxIOQueues = DefaultMaxIOQueues
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.QueueSize < 2 || cfg.QueueSize > 1024 || cfg.MaxIOQueues > 128 {
		return nil, fmt.Errorf("%w: queue size %d (want 2..1024) or %d I/O queues (want ≤ 128)", ErrConfig, cfg.QueueSize, cfg.MaxIOQueues)
	}
	if cfg.InlineData <= 0 {
		cfg.InlineData = DefaultInlineData
	}
	if cfg.InlineData%16 != 0 || cfg.InlineData > 1<<20 {
		return nil, fmt.Errorf("%w: in-capsule data %d bytes (want a multiple of 16 up to 1 MiB)", ErrConfig, cfg.InlineData)
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
	t := &Target{cfg: cfg, vs: cd.VER, nn: cd.NN, mdts: cd.MDTS, serial: cd.SerialNumber,
		ctrls: map[uint16]*controller{}, nextID: 1, conns: map[net.Conn]struct{}{}}
	if t.vs == 0 {
		t.vs = 0x00010300
	}
	t.maxData = minMaxData
	if t.mdts != 0 && t.mdts < 20 && uint32(nvme.DefaultMinPageSize)<<t.mdts > t.maxData {
		t.maxData = uint32(nvme.DefaultMinPageSize) << t.mdts
	}
	return t, nil
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

// ServeConn serves one queue connection in a new goroutine.
func (t *Target) ServeConn(c net.Conn) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		q := &queue{t: t, conn: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10), pending: map[uint16]*request{}}
		err := q.serve()
		q.detach()
		c.Close()
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

// newController allocates a controller ID (1..0xFFEF) for an admin queue Connect.
func (t *Target) newController(d ConnectData, katoMs uint32) (*controller, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range 0xFFEF {
		id := t.nextID
		t.nextID++
		if t.nextID > 0xFFEF {
			t.nextID = 1
		}
		if _, used := t.ctrls[id]; !used {
			c := &controller{id: id, hostNQN: d.HostNQN, hostID: d.HostID, katoMs: katoMs, queues: map[uint16]*queue{}}
			t.ctrls[id] = c
			return c, nil
		}
	}
	return nil, errors.New("nvmetcp: no free controller ID")
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
	qs := make([]*queue, 0, len(c.queues))
	for qid, q := range c.queues {
		if qid != 0 {
			qs = append(qs, q)
		}
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.conn.Close()
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
		return fmt.Errorf("--listen %q: %w (want HOST:PORT, e.g. 127.0.0.1:4420)", listen, err)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("%w: --listen %q listens on every interface; use 127.0.0.1:PORT or pass --allow-remote", ErrNotLoopback, listen)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w: --listen %s reaches %s; the target has no authentication, pass --allow-remote to expose it", ErrNotLoopback, listen, ip)
		}
	}
	return nil
}
