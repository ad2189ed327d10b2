package server

// The SQS front end (package sqs): its listener and its HTTP server.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/connlimit"
	"github.com/lmq-gateway/lmq-gateway/sqs"
)

// listenSQS binds the SQS listener and builds its server; nothing when SQS
// is off.
func (s *Server) listenSQS() error {
	cfg := s.cfg
	if cfg.SQSListen == "" && cfg.SQSListener == nil {
		return nil
	}
	l := cfg.SQSListener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", cfg.SQSListen); err != nil {
			return fmt.Errorf("--sqs-listen %s: %w", cfg.SQSListen, err)
		}
	}
	s.sqsAddr = l.Addr()
	s.logSQSExposure(l.Addr())
	if cfg.SQSTLS != nil {
		l = tls.NewListener(l, cfg.SQSTLS)
	}
	s.sl = &stopListener{Listener: connlimit.Listen(l, cfg.MaxSQSConns)}
	h := sqs.New(sqs.CoreOf(s.core), sqs.Options{
		Account:         cfg.SQSAccount,
		Region:          cfg.SQSRegion,
		MaxRequestBytes: cfg.SQSMaxRequestBytes,
		ReadTimeout:     cfg.Timeouts.BodyIdle,
		WriteTimeout:    cfg.Timeouts.Write,
		Authenticate:    cfg.SQSAuthenticate,
		CrossOrigin:     s.cop,
		Logger:          s.log,
	})
	s.sqs = &http.Server{
		Handler:           s.track(h),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return nil
}

// logSQSExposure says how SQS requests are authenticated.
func (s *Server) logSQSExposure(addr net.Addr) {
	if s.cfg.SQSAuthenticate != nil {
		s.log.Info("SQS API requires AWS Signature Version 4", "sqs", addr.String())
		return
	}
	ta, ok := addr.(*net.TCPAddr)
	if ok && ta.IP.IsLoopback() {
		s.log.Info("SQS API accepts any credentials (no authentication); it listens on loopback only", "sqs", addr.String())
		return
	}
	s.log.Warn("SQS API IS OPEN: it accepts any credentials, and anyone who reaches this address can send, receive, purge and delete every queue"+
		" (bind it to loopback with --sqs-listen 127.0.0.1:9324, or require AWS signatures with --auth-token, --auth-basic or --tokens)",
		"sqs", addr.String())
}

// sigV4For is the SQS front end's check of AWS signatures by guard: its
// refusals in SQS's terms.
func sigV4For(guard *auth.Guard) func(r *http.Request, body []byte) (*auth.SigV4Result, error) {
	return func(r *http.Request, body []byte) (*auth.SigV4Result, error) {
		res, err := guard.AuthenticateSigV4(r, body, time.Now())
		var se *auth.SigV4Error
		if errors.As(err, &se) {
			return nil, &sqs.AuthError{Code: se.Code, Message: se.Message, Status: se.Status()}
		}
		return res, err
	}
}

// SQSAddr is the address the SQS API listens on; nil when it is off.
func (s *Server) SQSAddr() net.Addr {
	if s.sl == nil {
		return nil
	}
	return s.sl.Addr()
}

// sqsWhere is the start line's SQS address, "off" when SQS is off.
func (s *Server) sqsWhere() string {
	if s.sl == nil {
		return "off"
	}
	if s.cfg.SQSTLS != nil {
		return "https://" + s.sqsAddr.String()
	}
	return s.sqsAddr.String()
}
