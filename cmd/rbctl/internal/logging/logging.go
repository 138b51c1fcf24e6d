// Package logging is rbctl's one log: log/slog on stderr, in text or JSON, at a level, set
// by the global flags --log-format and --log-level before any command runs. Commands that
// log (serve, its cluster membership, TLS reloads) take slog.Default(); their results go to
// stdout as before, so a log never mixes into what a script parses.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// Options are the values of the global log flags.
type Options struct {
	Format string // text or json
	Level  string // debug, info, warn or error
}

// Register adds --log-format and --log-level to fs (the root's persistent flags).
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", "text", "log lines on stderr as text (key=value) or json (one object a line)")
	fs.StringVar(&o.Level, "log-level", "info", "least severe log lines shown: debug, info, warn or error")
}

// Handler builds the handler the options describe, writing to w.
func (o Options) Handler(w io.Writer) (slog.Handler, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(o.Level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.Level)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(o.Format) {
	case "text":
		return slog.NewTextHandler(w, ho), nil
	case "json":
		return slog.NewJSONHandler(w, ho), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", o.Format)
}

// Setup makes the options' logger, on w, the default (slog.SetDefault).
func (o Options) Setup(w io.Writer) error {
	h, err := o.Handler(w)
	if err != nil {
		return err
	}
	slog.SetDefault(slog.New(h))
	return nil
}
