package client

import (
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/reports/cachereport"
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
		row := []string{cachereport.Escape(e.Key), strconv.Itoa(int(e.Size)), cachereport.Escape(e.CacheSalt), h, strconv.FormatBool(e.Replica)}
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

// WriteStats renders a node's counters and latency percentiles, sorted by name.
func WriteStats(w io.Writer, s *p2ppb.StatsResponse) error {
	var rows [][]string
	for k, v := range s.Counters {
		rows = append(rows, []string{k, strconv.FormatInt(v, 10)})
	}
	for k, v := range s.LatencyUs {
		rows = append(rows, []string{k, strconv.FormatFloat(v, 'f', 0, 64) + " us"})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	if _, err := fmt.Fprintf(w, "node %s\n", cachereport.Escape(s.Node)); err != nil {
		return err
	}
	t := reports.NewTable(w)
	t.Header([]string{"counter", "value"})
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}
