package flagsets

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// HangUp makes SIGHUP harmless to a node from the moment it is called until the process
// exits (ignored once ctx ends, while the node shuts down): a closing SSH session or
// `kill -HUP` never stops a node (the default action of SIGHUP
// would, without its final checkpoint). Each SIGHUP is logged with what it reloads: the
// TLS files when the node has them (TLS.Serve's own watcher re-reads them), else nothing.
func HangUp(ctx context.Context, log *slog.Logger, reloads func() string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				// Shutting down (a final checkpoint may take a while): SIGHUP stays harmless
				// until the process exits, never back to its default action.
				signal.Ignore(syscall.SIGHUP)
				signal.Stop(hup)
				return
			case <-hup:
				if what := reloads(); what != "" {
					log.Info("SIGHUP: reloading", "what", what)
				} else {
					log.Info("SIGHUP: nothing to reload (no --tls-cert/--tls-key/--tls-ca); still serving")
				}
			}
		}
	}()
}

// Reloads names what SIGHUP reloads for these flags ("" for nothing).
func (f *TLS) Reloads() string {
	if f.Files.Empty() {
		return ""
	}
	return "the TLS files " + f.Files.Cert + ", " + f.Files.Key + ", " + f.Files.CA
}
