package resp

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// ServeConn runs one client connection until it quits, sends something malformed, fails
// AUTH s.Conns.MaxAuthFailures times, does not authenticate within s.Conns.AuthTimeout (when
// the server checks AUTH), stays idle longer than idle once authenticated (0: no limit), or
// ctx ends. Requests are read and answered in order; replies are flushed when no further
// request is already buffered, so a pipelined batch costs one write, and always before the
// connection waits for more bytes (flushFirst), so a request followed by part of the next
// is answered at once. It closes c.
//
// The connection's own context (session.ctx) derives from ctx and ends when ctx does (the
// server shuts down), when a reply write fails (the client went away, or stopped reading for
// WriteTimeout) and when ServeConn returns: a command of many keys stops between two keys
// once it ends (Server.stopped), so no value is loaded for a client that is gone, and a
// shutdown does not wait for the rest of an MGET.
func (s *Server) ServeConn(ctx context.Context, c net.Conn, idle time.Duration) error {
	defer c.Close()
	s.clients.Add(1)
	defer s.clients.Add(-1)
	lim := s.Conns.withDefaults()
	base := ctx
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	w := newReplyWriter(c, lim.WriteTimeout)
	w.failed = cancel
	rd := NewReader(flushFirst{c, w}, s.Limits)
	rd.Budget, rd.Ctx, rd.BudgetWait = s.Budget, ctx, s.budgetWait()
	defer rd.Release()
	r := reply{w: w}
	ss := &session{id: s.nextID.Add(1), client: c.RemoteAddr().String(), ctx: ctx}
	ac, _ := c.(*admitConn)
	ss.onAuth = func() {
		if ac != nil {
			ac.authenticated()
		}
	}
	if s.authRequired() {
		rd.PreAuth = true
		c.SetReadDeadline(time.Now().Add(lim.AuthTimeout))
	}
	for {
		if rd.PreAuth && ss.authed {
			rd.PreAuth = false
			c.SetReadDeadline(time.Time{})
		}
		if !rd.PreAuth && idle > 0 && rd.Buffered() == 0 {
			c.SetReadDeadline(time.Now().Add(idle))
		}
		if ctx.Err() != nil { // a deadline set above must not undo the cancellation's
			if err := w.Flush(); base.Err() == nil {
				return err // a reply write failed
			}
			return nil
		}
		args, err := rd.Next()
		if err != nil {
			if errors.Is(err, ErrProtocol) || errors.Is(err, ErrBusy) {
				r.err("ERR " + err.Error())
				w.Flush()
				return err
			}
			w.Flush()
			if err == io.EOF || ctx.Err() != nil {
				return nil
			}
			return err
		}
		ss.held = rd.Held()
		s.noteHeld(ss.held)
		s.dispatch(ss, args, r)
		if ss.quit {
			return w.Flush()
		}
		if rd.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// flushFirst is the connection as the request reader reads it: before every read from the
// socket it writes the replies still pending. Without it a complete request followed by
// part of the next one (a client that writes a large SET in pieces after a GET, or any
// request split across packets) waited unanswered for the rest of the next one to arrive.
type flushFirst struct {
	c net.Conn
	w *replyWriter
}

func (f flushFirst) Read(p []byte) (int, error) {
	if f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.c.Read(p)
}

func (s *Server) budgetWait() time.Duration {
	if s.BudgetWait > 0 {
		return s.BudgetWait
	}
	return 10 * time.Second
}

// Serve accepts connections on l until ctx ends or l fails, each served by ServeConn on its
// own goroutine; it waits for them before it returns. Connections over s.Conns are closed at
// accept.
func (s *Server) Serve(ctx context.Context, l net.Listener, idle time.Duration) error {
	al := newAdmitListener(l, s.Conns.withDefaults(), s.authRequired(), &s.refused, &s.evicted, s.Logger)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := al.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "use of closed") {
				return ctx.Err()
			}
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.ServeConn(ctx, c, idle) }()
	}
}
