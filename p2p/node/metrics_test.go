package node

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The Prometheus text carries the remote stats counters, the checkpoint age and the
// latency histograms, with the values the node counted.
func TestMetricsText(t *testing.T) {
	a := startNode(t, newEngine(t, nil), fastOptions("a", nil))
	b := startNode(t, newEngine(t, nil), fastOptions("b", NewStaticDirectory(a.Peer())))
	put(t, dial(t, a), 1, 5000)
	get(t, dial(t, b), 1)
	get(t, dial(t, b), 1)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{
		"rbctl_node_peer_hits_total 1\n", "rbctl_node_local_hits_total 1\n", "rbctl_node_replicas_stored_total 1\n",
		"rbctl_node_slots_used 1\n", "# TYPE rbctl_node_leases_active gauge", "rbctl_node_checkpoint_age_seconds ",
		"rbctl_node_peer_fetch_seconds_count 1\n", "rbctl_node_local_load_seconds_count 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}

// A front end's counters (AddStats) reach Stats and /metrics: NAME/REASON as a counter with
// a reason label, the RESP gauges as gauges; a front end's failed AUTHs count in auth_failed.
func TestMetricsFrontEndCounters(t *testing.T) {
	n := startNode(t, newEngine(t, nil), fastOptions("a", nil))
	n.AddStats(func() map[string]int64 {
		return map[string]int64{"resp_set_dropped/full": 3, "resp_set_dropped/too_large": 1, "resp_conns": 2}
	})
	n.CountAuthFailure()
	if c := n.Stats().Counters; c["resp_set_dropped/full"] != 3 || c["auth_failed"] != 1 {
		t.Fatalf("stats %v", c)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{`rbctl_node_resp_set_dropped_total{reason="full"} 3`, `rbctl_node_resp_set_dropped_total{reason="too_large"} 1`,
		"# TYPE rbctl_node_resp_conns gauge", "rbctl_node_resp_conns 2\n", "rbctl_node_auth_failed_total 1\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}
