package clusterbench

import (
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/reports"
)

// TLSMode says whether the nodes talk over TLS: the cost of mutual TLS on both planes is
// what TLSBoth measures, each mode run in plain TCP and then over TLS on fresh devices.
type TLSMode string

const (
	TLSOff  TLSMode = "off"  // plain TCP (the default)
	TLSOn   TLSMode = "on"   // every node with a certificate of a throwaway CA, mutual TLS
	TLSBoth TLSMode = "both" // each mode twice: plain TCP, then TLS
)

// ParseTLSMode accepts off, on or both.
func ParseTLSMode(s string) (TLSMode, error) {
	switch m := TLSMode(s); m {
	case TLSOff, TLSOn, TLSBoth:
		return m, nil
	}
	return "", fmt.Errorf("TLS mode %q is not off, on or both", s)
}

// runs lists the transports of each mode: false is plain TCP.
func (m TLSMode) runs() []bool {
	switch m {
	case TLSOn:
		return []bool{true}
	case TLSBoth:
		return []bool{false, true}
	}
	return []bool{false}
}

// clusterCA makes a throwaway CA whose files live in the run's directory.
func clusterCA() (*secure.CA, error) {
	now := time.Now()
	return secure.NewCA("cluster-bench", now.Add(-time.Hour), now.Add(24*time.Hour))
}

// nodeTLS issues node name's certificate (for 127.0.0.1, where the nodes listen) into dir
// and loads it.
func nodeTLS(ca *secure.CA, dir, name string) (*secure.Material, error) {
	f, err := ca.WriteFiles(dir, name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, err
	}
	f.CA = filepath.Join(dir, "ca.crt")
	return secure.Load(f, nil)
}

// cpuSeconds is the process's CPU time (user + system) so far: the nodes, their emulated
// SSDs and the request driver all run in this process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// cpuPerGB is CPU seconds per GB (1e9 bytes) moved between peers; nil when none moved.
func (r *Result) cpuPerGB() *float64 {
	if r.Total.PeerBytesIn == 0 {
		return nil
	}
	v := r.CPUSeconds / (float64(r.Total.PeerBytesIn) / 1e9)
	return &v
}

// writeTLSCost compares each mode run over TLS with the same mode in plain TCP.
func writeTLSCost(w io.Writer, rs []Result) error {
	plain := map[Mode]Result{}
	for _, r := range rs {
		if !r.TLS {
			plain[r.Mode] = r
		}
	}
	for _, r := range rs {
		p, ok := plain[r.Mode]
		if !r.TLS || !ok || r.Seconds <= 0 || p.Seconds <= 0 || r.Total.PeerBytesIn == 0 {
			continue
		}
		line := fmt.Sprintf("%s over TLS against plain TCP: %.3f of the throughput (%.1f vs %.1f requests/s, %.1f vs %.1f peer MiB/s); process CPU %s vs %s s per GB moved between peers",
			r.Mode, (float64(r.Requests)/r.Seconds)/(float64(p.Requests)/p.Seconds),
			float64(r.Requests)/r.Seconds, float64(p.Requests)/p.Seconds,
			float64(r.Total.PeerBytesIn)/(1<<20)/r.Seconds, float64(p.Total.PeerBytesIn)/(1<<20)/p.Seconds,
			opt(r.cpuPerGB()), opt(p.cpuPerGB()))
		if err := reports.WriteWrapped(w, line); err != nil {
			return err
		}
	}
	return nil
}
