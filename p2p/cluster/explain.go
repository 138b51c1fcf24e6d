package cluster

// A membership that explains itself: events logged, members listed with their state and
// the age and size of their filters, default names that stay unique.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member states in DirectoryStats.
const (
	StateAlive   = 0 // answering probes
	StateSuspect = 1 // missed probes; the cluster waits for it to refute before dropping it
	StateFailed  = 2 // declared dead; joined again every ReconnectInterval until ReconnectFor
)

// DirectoryStats returns the directory's figures as counters: members (live, this one
// included), directory_local_keys, directory_filter_bytes (of the published filter), and
// per peer member/NAME/state (StateAlive, StateSuspect, StateFailed), member/NAME/filter_bytes
// and member/NAME/filter_age_ms (since its filter last changed here; -1: none received).
// Node names hold no '/', so the names parse back.
func (c *Cluster) DirectoryStats() map[string]int64 {
	keys, g, _, _ := c.local.stats()
	out := map[string]int64{"directory_local_keys": int64(keys), "directory_filter_bytes": int64(g.bits / 8)}
	bound := c.FailureBound()
	now := time.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	out["members"] = int64(len(c.members) + 1)
	for name := range c.members {
		p := "member/" + name + "/"
		out[p+"state"] = StateAlive
		if c.noted(c.suspected, name, bound) {
			out[p+"state"] = StateSuspect
		}
		out[p+"filter_age_ms"] = -1
		if r := c.remotes[name]; r != nil && r.filter != nil {
			out[p+"filter_bytes"] = int64(r.filter.bits / 8)
			out[p+"filter_age_ms"] = now.Sub(r.updated).Milliseconds()
		}
	}
	for name, f := range c.failed {
		if _, live := c.members[name]; !live {
			out["member/"+name+"/state"] = StateFailed
			out["member/"+name+"/failed_ms"] = now.Sub(f.since).Milliseconds()
		}
	}
	return out
}

// events logs membership changes to cfg.Events (nil: not at all).
func (c *Cluster) event(level slog.Level, msg string, args ...any) {
	if c.cfg.Events != nil {
		c.cfg.Events.Log(context.Background(), level, msg, append([]any{"cluster", c.cfg.Cluster, "self", c.cfg.Name}, args...)...)
	}
}

// NotifyConflict: another node claims this node's name, or two peers claim one name.
// Memberlist keeps the first and ignores the other, which so never sees the cluster.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.c().event(slog.LevelWarn, "member name conflict: two nodes claim one name; the second is ignored until one is renamed",
		"name", existing.Name, "known_at", existing.Address(), "other_at", other.Address())
}

var _ memberlist.ConflictDelegate = (*delegate)(nil)

// memberlistLog reads memberlist's log: a suspicion and a failure verdict are noted
// (memberlist v0.7 tells its event delegate neither: the Node it passes to NotifyLeave
// carries no state) and, with Events, passed on with memberlist's warnings and errors
// (its other lines are probes and pushes).
type memberlistLog struct{ c *Cluster }

var (
	suspectLine = regexp.MustCompile(`Suspect (\S+) has failed`)
	failedLine  = regexp.MustCompile(`Marking (\S+) as failed`)
)

func (w memberlistLog) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		s := strings.TrimSpace(string(line))
		if m := suspectLine.FindStringSubmatch(s); m != nil {
			w.c.note(w.c.suspected, m[1])
			w.c.event(slog.LevelWarn, "member suspected", "name", m[1], "detail", s)
		} else if m := failedLine.FindStringSubmatch(s); m != nil {
			w.c.note(w.c.failedMark, m[1])
		} else if strings.Contains(s, "[WARN]") || strings.Contains(s, "[ERR]") {
			w.c.event(slog.LevelWarn, "gossip", "detail", s)
		}
	}
	return len(p), nil
}

// note records when name was last suspected or declared failed.
func (c *Cluster) note(m map[string]time.Time, name string) {
	c.smu.Lock()
	m[name] = time.Now()
	c.smu.Unlock()
}

// noted reports whether name was noted in m within d.
func (c *Cluster) noted(m map[string]time.Time, name string, d time.Duration) bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	t, ok := m[name]
	return ok && time.Since(t) <= d
}

func (c *Cluster) memberlistLogger() *log.Logger { return log.New(memberlistLog{c}, "", 0) }

// PersistentName returns the node name kept in file, creating it (and its directory) on
// first use as base plus a random 8-hex-digit part: unique among hosts that share a host
// name (containers of one image), stable across restarts of the node.
func PersistentName(file, base string) (string, error) {
	if b, err := os.ReadFile(file); err == nil {
		if n := strings.TrimSpace(string(b)); validName(n) {
			return n, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var r [4]byte
	rand.Read(r[:])
	base = unsafeName.ReplaceAllString(base, "-")
	if len(base) > 55 {
		base = base[:55]
	}
	if base == "" {
		base = "node"
	}
	name := base + "-" + hex.EncodeToString(r[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return name, fmt.Errorf("node name file %s: %w", file, err)
	}
	if err := os.WriteFile(file, []byte(name+"\n"), 0o644); err != nil {
		return name, fmt.Errorf("node name file %s: %w", file, err)
	}
	return name, nil
}
