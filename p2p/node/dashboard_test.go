package node

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Every metric the Grafana dashboard of docs/examples names is one a node exports: the
// families of a node's /metrics after a put and two gets (one a peer hit), and the member
// state of a node in a cluster. A renamed metric fails here, not in someone's Grafana.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "grafana-node-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, newEngine(t, nil), fastOptions("a", nil))
	b := startNode(t, newEngine(t, nil), fastOptions("b", NewStaticDirectory(a.Peer())))
	put(t, dial(t, a), 1, 5000)
	get(t, dial(t, b), 1)
	get(t, dial(t, b), 1)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)`).FindAllStringSubmatch(rec.Body.String(), -1) {
		exported[m[1]] = true
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[m[1]+s] = true
			}
		}
	}
	// The member state is exported only by a node in a cluster; its name is the collector's.
	if !strings.Contains(memberDesc.String(), `"rbctl_node_member_state"`) {
		t.Fatalf("member state metric renamed: %s", memberDesc)
	}
	exported["rbctl_node_member_state"] = true

	name := regexp.MustCompile(`\brbctl_[a-z0-9_]+`)
	named := map[string]bool{}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			named[n] = true
		}
	}
	if len(named) < 10 {
		t.Fatalf("the dashboard names only %d metrics: %v", len(named), named)
	}
	var missing []string
	for n := range named {
		if !exported[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the dashboard names metrics no node exports: %v", missing)
	}
}
