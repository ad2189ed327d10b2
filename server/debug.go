package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DebugAddr is the address of the pprof listener (Config.DebugListen); nil
// when it is off.
func (s *Server) DebugAddr() net.Addr {
	if s.dl == nil {
		return nil
	}
	return s.dl.Addr()
}

// listenDebug binds the pprof listener of Config.DebugListen, if any. Its
// handlers are registered on a mux of its own, not http.DefaultServeMux, so
// that importing net/http/pprof exposes nothing on the API's listener.
func (s *Server) listenDebug() error {
	addr := s.cfg.DebugListen
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-listen %s: %w", addr, err)
	}
	if ta, ok := l.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		s.log.Warn("DEBUG LISTENER IS OPEN: pprof has no authentication and exposes the process's memory, code and CPU time to anyone who reaches this address"+
			" (bind it to loopback, e.g. --debug-listen 127.0.0.1:6060)", "debug", l.Addr().String())
	} else {
		s.log.Info("pprof debug listener", "debug", l.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.dl = &stopListener{Listener: l}
	s.debug = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return nil
}
