package rpc

import (
	"context"
	"time"
)

// Connection slots at Options.MaxConns. Waiting in the kernel's accept queue
// (package internal/connlimit) keeps a flood of connections cheap, but alone
// it lets connections that hold a slot and do nothing lock everyone else
// out: idle ones (a pool of a client that went quiet, or a client that
// connects and never sends) forever, stalled ones (a request begun and never
// finished) until RequestTimeout cuts them. So the listener accepts one
// connection beyond the bound, and that newcomer waits here while the
// connection idle the longest is closed to make room for it: one at a time,
// and only when someone is waiting. A connection is idle while it has no
// request being read or served and no answer waiting to be written, so a
// client waiting in a long-poll pull is never cut; with no idle connection
// the newcomer waits until one closes. A connection is not reclaimed within
// reclaimGrace of its last use: its client may have just connected or
// finished a request, its next one on the way.

// reclaimGrace is how long a connection must have been idle to be reclaimed.
const reclaimGrace = time.Second

// makeRoomLocked waits (s.mu held, released while waiting) until fewer than
// MaxConns connections are served, reclaiming the longest-idle one; false
// when the server closed or ctx ended meanwhile.
func (s *Server) makeRoomLocked(ctx context.Context) bool {
	if s.closed || ctx.Err() != nil {
		return false
	}
	if s.opt.MaxConns <= 0 || len(s.conns) < s.opt.MaxConns {
		return true
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.gone.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	for len(s.conns) >= s.opt.MaxConns {
		if s.closed || ctx.Err() != nil {
			return false
		}
		var recheck *time.Timer
		if !s.reclaimingLocked() {
			c, later := s.longestIdleLocked(time.Now())
			switch {
			case c != nil:
				c.reclaimed = true
				idle := time.Since(time.Unix(0, c.lastUsed.Load()))
				s.log.Info("rpc connection limit reached: closing the longest-idle connection for a new one",
					"remote", c.nc.RemoteAddr().String(), "idle", idle.Round(time.Millisecond), "max_conns", s.opt.MaxConns)
				c.abort()
			case later > 0:
				// An idle connection within its grace: look again then.
				recheck = time.AfterFunc(later, func() {
					s.mu.Lock()
					s.gone.Broadcast()
					s.mu.Unlock()
				})
			}
		}
		s.gone.Wait()
		if recheck != nil {
			recheck.Stop()
		}
	}
	return true
}

// reclaimingLocked reports whether a connection closed to make room has not
// ended yet (one at a time).
func (s *Server) reclaimingLocked() bool {
	for c := range s.conns {
		if c.reclaimed {
			return true
		}
	}
	return false
}

// longestIdleLocked is the served connection idle the longest, at least
// reclaimGrace; nil if none is. later is when the first connection idle for
// less than that reaches it (0: none is idle).
func (s *Server) longestIdleLocked(now time.Time) (best *conn, later time.Duration) {
	var bestAt int64
	for c := range s.conns {
		if c.busy.Load() != 0 || !c.out.idle() {
			continue
		}
		at := c.lastUsed.Load()
		if wait := time.Unix(0, at).Add(reclaimGrace).Sub(now); wait > 0 {
			if later == 0 || wait < later {
				later = wait
			}
			continue
		}
		if best == nil || at < bestAt {
			best, bestAt = c, at
		}
	}
	return best, later
}
