package client

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/reports"
)

// WriteList renders a node's key list as rbctl's text table (keys and salts escaped).
func WriteList(w io.Writer, r *p2ppb.ListResponse) error {
	t := reports.NewTable(w)
	t.Header([]string{"key", "size", "cache_salt", "handle", "replica"})
	for _, e := range r.Entries {
		h := "-" // written without a placement directive
		if e.Handle >= 0 {
			h = strconv.Itoa(int(e.Handle))
		}
		row := []string{reports.Escape(e.Key), strconv.Itoa(int(e.Size)), reports.Escape(e.CacheSalt), h, strconv.FormatBool(e.Replica)}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if r.Truncated {
		_, err := fmt.Fprintln(w, "(truncated: the node holds more keys than listed)")
		return err
	}
	return nil
}

// WriteStats renders a node's counters and latency percentiles, sorted by name, then a
// row per device (counters devN_NAME) and per cluster member (member/NAME/FIELD).
func WriteStats(w io.Writer, s *p2ppb.StatsResponse) error {
	var rows [][]string
	devs := map[int]map[string]int64{}
	members := map[string]map[string]int64{}
	for k, v := range s.Counters {
		if name, field, ok := memberCounter(k); ok {
			if members[name] == nil {
				members[name] = map[string]int64{}
			}
			members[name][field] = v
			continue
		}
		if m := devCounter.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[1])
			if devs[i] == nil {
				devs[i] = map[string]int64{}
			}
			devs[i][m[2]] = v
			continue
		}
		rows = append(rows, []string{reports.Escape(k), strconv.FormatInt(v, 10)})
	}
	for k, v := range s.LatencyUs {
		rows = append(rows, []string{reports.Escape(k), strconv.FormatFloat(v, 'f', 0, 64) + " us"})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	if _, err := fmt.Fprintf(w, "node %s\n", reports.Escape(s.Node)); err != nil {
		return err
	}
	t := reports.NewTable(w)
	t.Header([]string{"counter", "value"})
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(devs) > 0 {
		fields := []string{"slots_total", "slots_used", "engine_puts", "engine_put_failed", "checkpoints", "checkpoints_forced", "checkpoint_errors", "dirty_ops"}
		t := reports.NewTable(w)
		t.Header(append([]string{"device"}, fields...))
		idx := make([]int, 0, len(devs))
		for i := range devs {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			row := []string{strconv.Itoa(i)}
			for _, f := range fields {
				row = append(row, strconv.FormatInt(devs[i][f], 10))
			}
			if err := t.Append(row); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if len(members) > 0 {
		names := make([]string, 0, len(members))
		for n := range members {
			names = append(names, n)
		}
		sort.Strings(names)
		t := reports.NewTable(w)
		t.Header([]string{"member", "state", "filter_bytes", "filter_age"})
		for _, n := range names {
			m := members[n]
			state, age := memberStates[m["state"]], "-"
			if state == "" {
				state = strconv.FormatInt(m["state"], 10)
			}
			if a, ok := m["filter_age_ms"]; ok && a >= 0 {
				age = strconv.FormatInt(a, 10) + " ms"
			}
			if f, ok := m["failed_ms"]; ok {
				state += " for " + strconv.FormatInt(f, 10) + " ms"
			}
			if err := t.Append([]string{reports.Escape(n), state, strconv.FormatInt(m["filter_bytes"], 10), age}); err != nil {
				return err
			}
		}
		return t.Render()
	}
	return nil
}

var devCounter = regexp.MustCompile(`^dev(\d+)_(.+)$`)

// memberStates name cluster.StateAlive, StateSuspect and StateFailed.
var memberStates = map[int64]string{0: "alive", 1: "suspect", 2: "failed (rejoining)"}

// memberCounter splits member/NAME/FIELD.
func memberCounter(k string) (name, field string, ok bool) {
	rest, ok := strings.CutPrefix(k, "member/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// ListEntry is one key of a node's list in rbctl's JSON, as rbctl ls spells a key: the
// handle is left out for a key written without a placement directive.
type ListEntry struct {
	Key     string `json:"key"`
	Size    int64  `json:"size_bytes"`
	Salt    string `json:"cache_salt,omitempty"`
	Handle  *int32 `json:"handle,omitempty"`
	Replica bool   `json:"replica"`
}

// ListJSON is remote ls's --json document: the keys (an empty list when there are none,
// as ls prints) and whether the node held more than it listed.
type ListJSON struct {
	Keys      []ListEntry `json:"keys"`
	Truncated bool        `json:"truncated"`
}

// ListDocument turns a node's list into ListJSON.
func ListDocument(r *p2ppb.ListResponse) ListJSON {
	out := ListJSON{Keys: make([]ListEntry, 0, len(r.Entries)), Truncated: r.Truncated}
	for _, e := range r.Entries {
		le := ListEntry{Key: e.Key, Size: int64(e.Size), Salt: e.CacheSalt, Replica: e.Replica}
		if e.Handle >= 0 {
			h := e.Handle
			le.Handle = &h
		}
		out.Keys = append(out.Keys, le)
	}
	return out
}

// SourceName is where a node's Get found a chunk, in words: local, peer or miss.
func SourceName(s p2ppb.Source) string {
	switch s {
	case p2ppb.Source_SOURCE_LOCAL:
		return "local"
	case p2ppb.Source_SOURCE_PEER:
		return "peer"
	case p2ppb.Source_SOURCE_MISS:
		return "miss"
	}
	return "unknown"
}

// GetJSON is remote get's --json document: get's size and payload (base64), with where the
// node found the chunk.
type GetJSON struct {
	Source  string `json:"source"`         // local, peer
	Peer    string `json:"peer,omitempty"` // the peer that served it
	Size    int    `json:"size_bytes"`
	Payload []byte `json:"payload"`
}

// GetDocument turns a node's chunk into GetJSON.
func GetDocument(ch *p2ppb.Chunk) GetJSON {
	return GetJSON{Source: SourceName(ch.Source), Peer: ch.Peer, Size: len(ch.Payload), Payload: ch.Payload}
}
