package server

// The listeners the front ends serve: given by the embedding program, or
// bound here on the configured addresses.

import (
	"fmt"
	"net"
)

// bindHTTP returns the listener HTTP serves: Config.HTTPListener, a new one
// on Config.HTTPListen, or nil when HTTP is off (both unset).
func (s *Server) bindHTTP() (net.Listener, error) {
	if s.cfg.HTTPListener != nil {
		return s.cfg.HTTPListener, nil
	}
	if s.cfg.HTTPListen == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", s.cfg.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("--http-listen %s: %w", s.cfg.HTTPListen, err)
	}
	return l, nil
}

// bindRPC returns the listener RPC serves: Config.RPCListener or a new one
// on Config.RPCListen.
func (s *Server) bindRPC() (net.Listener, error) {
	if s.cfg.RPCListener != nil {
		return s.cfg.RPCListener, nil
	}
	return net.Listen("tcp", s.cfg.RPCListen) // the caller names the flag
}

// httpWhere is the start line's HTTP address, "off" when HTTP is off.
func (s *Server) httpWhere() string {
	if s.hl == nil {
		return "off"
	}
	return s.hl.Addr().String()
}

// logHTTPExposure says as loudly as logRPCExposure when the HTTP API (and
// its console), listening on addr beyond loopback, takes requests from
// anyone who reaches it: LMQ's default (all interfaces, no authentication)
// is kept for compatibility, but an operator must not learn it from an
// INFO line.
func (s *Server) logHTTPExposure(addr net.Addr) {
	if s.cfg.Auth.Enabled() {
		return
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		s.log.Info("HTTP API has no authentication; only this machine can reach it (loopback)", "http", addr.String())
		return
	}
	s.log.Warn("HTTP API IS OPEN: it has no authentication, and anyone who reaches this address can push, pull, purge and delete every queue, and use the console"+
		" (bind it to loopback with --http-listen 127.0.0.1:9980, or require credentials with --auth-token, --auth-basic or --tokens)",
		"http", addr.String())
}
