package secure

import (
	"bytes"
	"context"
	"os"
	"time"
)

// Watch reloads m whenever trigger delivers (SIGHUP) and, every poll (0: never), when a
// file's size or modification time changed since the last load. A set that fails to load
// is retried only after the files change again or on the next trigger, so a broken file is
// logged once, not every poll. Watch returns when ctx is done.
func (m *Material) Watch(ctx context.Context, poll time.Duration, trigger <-chan os.Signal) {
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	var failed []byte // stamp of the last set that did not load
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
			m.Reload()
		case <-tick:
			s, err := stampOf(m.files)
			if err != nil {
				s = []byte(err.Error()) // a missing file: one attempt per distinct error
			}
			if bytes.Equal(s, m.cur.Load().stamp) || bytes.Equal(s, failed) {
				continue
			}
			if err == nil && time.Since(newest(m.files)) < poll/2 {
				continue // a file may be mid-write; the next poll takes it
			}
			if m.Reload() != nil {
				failed = s
			}
		}
	}
}

// newest is the latest modification time of the files (zero when one cannot be read).
func newest(f Files) time.Time {
	var t time.Time
	for _, p := range []string{f.Cert, f.Key, f.CA} {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return time.Time{}
		}
		if st.ModTime().After(t) {
			t = st.ModTime()
		}
	}
	return t
}
