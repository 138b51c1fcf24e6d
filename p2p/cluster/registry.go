package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
)

// The registry lets nodes on one machine find each other with no seed and no service: a
// directory per cluster, one file per node holding its gossip address. A node writes its
// file on Join, rewrites it every reconnect interval, and removes it on Leave. An entry is
// stale, and ignored, when its process is gone or it was not rewritten for
// registryStaleAfter reconnect intervals (a node killed in another PID namespace).
//
// File <dir>/<node>.node, mode 0600, in a 0700 directory owned by the user:
//
//	rbctl-cluster 1
//	name <node>
//	addr <host:port>
//	pid <pid>
const (
	registryMagic      = "rbctl-cluster 1"
	registrySuffix     = ".node"
	registryMaxFile    = 512
	registryStaleAfter = 3
)

// DefaultRegistryDir is where the nodes of a cluster on this machine register:
// $XDG_RUNTIME_DIR/rbctl/cluster/<cluster>, else /run/rbctl/cluster/<cluster> for root,
// else <tmp>/rbctl-<uid>/cluster/<cluster>.
func DefaultRegistryDir(cluster string) string {
	if cluster == "" {
		cluster = defaultCluster
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rbctl", "cluster", cluster)
	}
	if os.Geteuid() == 0 {
		return filepath.Join("/run", "rbctl", "cluster", cluster)
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rbctl-%d", os.Geteuid()), "cluster", cluster)
}

type registry struct {
	dir   string
	stale time.Duration
}

type registryEntry struct {
	name, addr string
	pid        int
}

// openRegistry creates dir (0700) if needed and refuses one another user owns or others
// may write, since its entries tell this node whom to join.
func openRegistry(dir string, stale time.Duration) (*registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("registry directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("registry directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return nil, fmt.Errorf("registry %s is not a directory", dir)
	}
	if int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("registry directory %s is owned by uid %d with mode %v; want uid %d, not group or world writable",
			dir, st.Uid, fi.Mode().Perm(), os.Geteuid())
	}
	return &registry{dir: dir, stale: stale}, nil
}

func (r *registry) path(name string) string { return filepath.Join(r.dir, name+registrySuffix) }

// put writes (or refreshes) the node's entry atomically.
func (r *registry) put(e registryEntry) error {
	body := fmt.Sprintf("%s\nname %s\naddr %s\npid %d\n", registryMagic, e.name, e.addr, e.pid)
	tmp, err := os.CreateTemp(r.dir, "."+e.name+".tmp*")
	if err != nil {
		return fmt.Errorf("registry entry: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return fmt.Errorf("registry entry: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("registry entry: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path(e.name)); err != nil {
		return fmt.Errorf("registry entry: %w", err)
	}
	return nil
}

func (r *registry) remove(name string) {
	os.Remove(r.path(name))
}

// live lists the fresh entries other than self's; unreadable, malformed and stale files
// are skipped.
func (r *registry) live(self string, now time.Time) []registryEntry {
	files, err := os.ReadDir(r.dir)
	if err != nil {
		return nil
	}
	var out []registryEntry
	for _, f := range files {
		name, ok := strings.CutSuffix(f.Name(), registrySuffix)
		if !ok || name == self || !validName(name) || !f.Type().IsRegular() {
			continue
		}
		info, err := f.Info()
		if err != nil || now.Sub(info.ModTime()) > r.stale {
			continue
		}
		b, err := sys.ReadFileBounded(filepath.Join(r.dir, f.Name()), registryMaxFile)
		if err != nil {
			continue
		}
		e, err := parseRegistryEntry(b)
		if err != nil || e.name != name || !processAlive(e.pid) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// parseRegistryEntry decodes a registry file; it is bounded by its caller's read.
func parseRegistryEntry(b []byte) (registryEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 || lines[0] != registryMagic {
		return registryEntry{}, fmt.Errorf("%w: registry entry is not %q and three fields", ErrMalformed, registryMagic)
	}
	var e registryEntry
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "name":
			e.name = v
		case "addr":
			e.addr = v
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return registryEntry{}, fmt.Errorf("%w: registry pid %q", ErrMalformed, v)
			}
			e.pid = n
		default:
			return registryEntry{}, fmt.Errorf("%w: registry field %q", ErrMalformed, k)
		}
	}
	if !validName(e.name) || e.pid == 0 {
		return registryEntry{}, fmt.Errorf("%w: registry entry name %q pid %d", ErrMalformed, e.name, e.pid)
	}
	if _, _, err := net.SplitHostPort(e.addr); err != nil || len(e.addr) > maxAddrLen {
		return registryEntry{}, fmt.Errorf("%w: registry address %q", ErrMalformed, e.addr)
	}
	return e, nil
}

// processAlive reports whether pid names a running process (EPERM: it runs as another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
