package resp

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

func (s *Server) info(a [][]byte, r reply) {
	want := map[string]bool{}
	for _, x := range a {
		want[strings.ToLower(string(x))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b bytes.Buffer
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	extra := s.Store.Info()
	policy := "noeviction" // a store that does not say evicts nothing: a full store refuses
	if p, ok := extra["maxmemory_policy"]; ok {
		policy = p
	}
	mem := []string{"maxmemory_policy:" + policy}
	for _, k := range sortedKeys(extra) {
		if k != "maxmemory_policy" {
			mem = append(mem, k+":"+extra[k])
		}
	}
	section("Server", "redis_version:7.0.0", "rbctl_version:"+s.version(), "redis_mode:standalone", "resp_protocols:2")
	section("Clients", "connected_clients:"+strconv.FormatInt(s.clients.Load(), 10))
	section("Memory", mem...)
	st := s.Stats()
	stats := []string{"total_commands_processed:" + strconv.FormatInt(s.commands.Load(), 10),
		"rejected_connections:" + strconv.FormatInt(st["resp_conns_refused"], 10)}
	for _, k := range sortedKeys64(st) {
		if k != "resp_conns_refused" {
			stats = append(stats, "rbctl_"+strings.ReplaceAll(k, "/", "_")+":"+strconv.FormatInt(st[k], 10))
		}
	}
	section("Stats", stats...)
	section("Keyspace", fmt.Sprintf("db0:keys=%d,expires=0,avg_ttl=0", s.Store.Len()))
	r.bulk(b.Bytes())
}

func sortedKeys64(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Stats are the server's counters, named as the node's stats show them (docs/resp.md):
// resp_set_dropped/REASON per drop reason, resp_auth_failed, resp_conns (open now), ...
func (s *Server) Stats() map[string]int64 {
	m := map[string]int64{
		"resp_conns": s.clients.Load(), "resp_conns_refused": s.refused.Load(), "resp_conns_evicted": s.evicted.Load(),
		"resp_auth_failed": s.authFailed.Load(), "resp_auth_cut": s.authCut.Load(),
		"resp_get_failed": s.getErrs.Load(), "resp_reply_bytes": s.replyBytes.Load(),
		"resp_conn_peak_bytes": s.connPeak.Load(),
		"resp_get_timed":       s.getTimed.Load(), "resp_get_us": s.getNs.Load() / 1e3, "resp_get_write_us": s.getWriteNs.Load() / 1e3,
	}
	for i, r := range DropReasons {
		m["resp_set_dropped/"+r] = s.drops.n[i].Load()
	}
	if s.Budget != nil {
		b := s.Budget.Stats()
		m["resp_request_bytes"], m["resp_request_peak_bytes"] = b.Used, b.Peak
		m["resp_budget_waits"], m["resp_budget_timeouts"] = b.Waits, b.Timeouts
	}
	if s.Values != nil {
		s.Values.stats(m)
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
