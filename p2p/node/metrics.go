package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// gaugeCounters are the Stats counters that are levels, not running totals; every other
// counter is exported as a Prometheus counter (name_total).
var gaugeCounters = map[string]bool{
	"leases_active": true, "max_payload_bytes": true, "devices": true, "slots_total": true, "slots_used": true,
	"dirty_ops": true, "members": true, "directory_local_keys": true, "directory_filter_bytes": true,
	"healthy": true, "checkpoint_failing_seconds": true, "index_room_spare_bytes": true,
	"resp_conns": true, "resp_reply_bytes": true, "resp_conn_peak_bytes": true, "resp_request_bytes": true, "resp_request_peak_bytes": true,
}

// metrics exports the node's Stats counters (the same names as `rbctl remote stats`,
// prefixed rbctl_node_) on each scrape, the age of the last checkpoint, and histograms of
// peer-fetch and local-load latency.
type metrics struct {
	n                 *Node
	peerHist, locHist prometheus.Histogram
	reg               *prometheus.Registry

	mu        sync.Mutex
	ckpts     int64     // checkpoints seen at the last poll
	ckptAt    time.Time // when that count was first seen (the node's start for none)
	stop      chan struct{}
	pollEvery time.Duration
}

func newMetrics(n *Node) *metrics {
	buckets := prometheus.ExponentialBuckets(50e-6, 2, 18) // 50 µs .. 6.5 s
	m := &metrics{n: n, reg: prometheus.NewRegistry(), ckptAt: time.Now(), stop: make(chan struct{}), pollEvery: time.Second,
		peerHist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rbctl_node_peer_fetch_seconds",
			Help: "one peer fetch: lookup-and-lock, transfer and verification of one lease's chunks", Buckets: buckets}),
		locHist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rbctl_node_local_load_seconds",
			Help: "one local LoadManyInto batch", Buckets: buckets}),
	}
	m.reg.MustRegister(m, m.peerHist, m.locHist)
	return m
}

var (
	ckptAgeDesc = prometheus.NewDesc("rbctl_node_checkpoint_age_seconds",
		"seconds since the node last saw the checkpoint count grow (polled every second; since start when none)", nil, nil)
	memberDesc = prometheus.NewDesc("rbctl_node_member_state", "cluster member state: 0 alive, 1 suspect, 2 failed (rejoining)", []string{"member"}, nil)
)

// Describe sends nothing: the collector is unchecked, since its metrics follow the counters
// Stats has (devices and members come and go).
func (m *metrics) Describe(chan<- *prometheus.Desc) {}

// Collect reads Stats once per scrape.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.n.Stats()
	for k, v := range s.Counters {
		if rest, ok := strings.CutPrefix(k, "member/"); ok {
			if name, ok := strings.CutSuffix(rest, "/state"); ok {
				ch <- prometheus.MustNewConstMetric(memberDesc, prometheus.GaugeValue, float64(v), name)
			}
			continue
		}
		if name, label, ok := strings.Cut(k, "/"); ok { // NAME/LABEL (AddStats): a counter by reason
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("rbctl_node_"+name+"_total", "rbctl remote stats: "+name+"/REASON",
				[]string{"reason"}, nil), prometheus.CounterValue, float64(v), label)
			continue
		}
		if gaugeCounters[k] || strings.HasPrefix(k, "dev") {
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("rbctl_node_"+k, "rbctl remote stats: "+k, nil, nil), prometheus.GaugeValue, float64(v))
			continue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("rbctl_node_"+k+"_total", "rbctl remote stats: "+k, nil, nil), prometheus.CounterValue, float64(v))
	}
	m.mu.Lock()
	age := time.Since(m.ckptAt).Seconds()
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(ckptAgeDesc, prometheus.GaugeValue, age)
}

// poll notes when the checkpoint count grows.
func (m *metrics) poll() {
	t := time.NewTicker(m.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			var n int64
			for _, st := range m.n.cache.StatsByShard() {
				n += st.Checkpoints
			}
			m.mu.Lock()
			if n != m.ckpts {
				m.ckpts, m.ckptAt = n, time.Now()
			}
			m.mu.Unlock()
		}
	}
}

// serveMetrics serves /metrics on addr until ctx ends.
func (n *Node) serveMetrics(ctx context.Context, addr string) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	n.metricsAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.opts.Logger.Warn("metrics listener", "err", err)
		}
	}()
	n.opts.Logger.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { srv.Close(); <-done }, nil
}
