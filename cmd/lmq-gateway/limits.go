package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/rpc"
)

// limits are the settings bounding connections, time and memory per client,
// and those protecting the MessagePack-RPC port, which has no authentication
// of its own (LMQ's protocol has none).
type limits struct {
	rpcAllowUnauthenticated bool
	rpcTLSCert              string
	rpcTLSKey               string
	rpcTLSClientCA          string

	readBodyIdleTimeout time.Duration
	minBodyRate         int64
	writeTimeout        time.Duration
	maxHTTPConns        int
	maxRPCConns         int
	rpcMaxInflightBytes int
	rpcRequestTimeout   time.Duration
	rpcWriteTimeout     time.Duration
	rpcMaxAnswerBytes   int
	rpcMaxAnswersTotal  int
	maxQueues           int
}

// addLimitFlags defines l's flags on fs.
func addLimitFlags(fs *flag.FlagSet, l *limits) {
	fs.BoolVar(&l.rpcAllowUnauthenticated, "rpc-allow-unauthenticated", false,
		"let MessagePack-RPC, which has no authentication, listen on a non-loopback address while HTTP requires --auth-token or --auth-basic "+
			"(without it the gateway refuses to start so, unless --rpc-tls-client-ca authenticates RPC clients)")
	fs.StringVar(&l.rpcTLSCert, "rpc-tls-cert", "", "serve MessagePack-RPC over TLS with this PEM certificate (chain) `FILE`; needs --rpc-tls-key (may be the files of --tls-cert)")
	fs.StringVar(&l.rpcTLSKey, "rpc-tls-key", "", "PEM private key `FILE` of --rpc-tls-cert")
	fs.StringVar(&l.rpcTLSClientCA, "rpc-tls-client-ca", "", "require MessagePack-RPC clients to present a TLS certificate signed by a CA of this PEM `FILE` (needs --rpc-tls-cert): RPC's only authentication")

	fs.DurationVar(&l.readBodyIdleTimeout, "read-body-idle-timeout", 30*time.Second,
		"an HTTP request body whose next bytes do not arrive within this time is cut: 408, connection closed (0: no limit)")
	fs.Int64Var(&l.minBodyRate, "min-body-rate", 1024,
		"slowest average rate in bytes/s of an HTTP request body (counted over the time spent waiting for it, after a grace of --read-body-idle-timeout; slower: 408, connection closed) "+
			"and of an answer (each write may take --write-timeout plus its size at this rate); 0: no limit")
	fs.DurationVar(&l.writeTimeout, "write-timeout", 30*time.Second,
		"time to write each part of an HTTP answer to a client not reading it, after which the connection is closed; the time a pull waits for a message does not count (0: no limit)")
	fs.IntVar(&l.maxHTTPConns, "max-http-conns", 16384,
		"HTTP connections open at once (waiting pulls and idle keep-alive ones count); beyond it new connections wait in the kernel's queue until one closes. "+
			"Must exceed --max-waiting-pulls (0: no limit)")
	fs.IntVar(&l.maxRPCConns, "max-rpc-conns", 4096,
		"MessagePack-RPC connections served at once (each holds 128 KiB of buffers); at the limit the connection idle the longest (no request being read or served, "+
			"no answer pending) is closed for a newcomer, and with none idle new connections wait in the kernel's queue until one closes (0: no limit)")
	fs.DurationVar(&l.rpcRequestTimeout, "rpc-request-timeout", rpc.DefaultRequestTimeout,
		"time a MessagePack-RPC request may take to arrive once its first byte has come; slower: connection closed (0: no limit)")
	fs.DurationVar(&l.rpcWriteTimeout, "rpc-write-timeout", rpc.DefaultWriteTimeout,
		"time to write each batch of MessagePack-RPC answers to a client not reading them, and the longest its unwritten answers may stay at --rpc-max-answer-bytes; "+
			"then the connection is closed and the messages it was not given go back to their queues")
	fs.IntVar(&l.rpcMaxAnswerBytes, "rpc-max-answer-bytes", rpc.DefaultMaxAnswerBytes,
		"MessagePack-RPC answer bytes of one connection waiting to be written (a client that does not read them), counting those being built; at the limit its requests are not read "+
			"and its pulls take no message (one larger answer is still written alone); get_default_props and messages are served one at a time per connection (0: no limit)")
	fs.IntVar(&l.rpcMaxAnswersTotal, "rpc-max-answer-bytes-total", rpc.DefaultMaxTotalAnswers,
		"MessagePack-RPC answer bytes waiting to be written or being built across all connections; at the limit no connection reads a new request, "+
			"no pull takes a message and no get_default_props or messages answer is built until answers are written or their connections closed (0: no limit)")
	fs.IntVar(&l.rpcMaxInflightBytes, "rpc-max-inflight-bytes", 256<<20,
		"MessagePack-RPC request bytes held at once across all connections (each connection alone: 2 × --rpc-max-frame); when reached, no connection reads "+
			"a new request until answered ones free theirs, which may exceed it by the request each connection was reading (0: no limit)")
	fs.IntVar(&l.maxQueues, "max-queues", 100000,
		"queues that may exist, counted across the gateways sharing the JetStream (its LMQ_QUEUES bucket): a request that would create one more (push, batch, pull, properties; HTTP or RPC) "+
			"is answered 409 (RPC: \"too_many_queues\") naming the limit, until a queue is deleted. Exact on one gateway; gateways creating queues at the same moment may pass it "+
			"by the places each saw free (0: no limit)")
}

// check validates l against the rest of c.
func (l *limits) check(c *config) error {
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"--read-body-idle-timeout", l.readBodyIdleTimeout < 0},
		{"--min-body-rate", l.minBodyRate < 0},
		{"--write-timeout", l.writeTimeout < 0},
		{"--max-http-conns", l.maxHTTPConns < 0},
		{"--max-rpc-conns", l.maxRPCConns < 0},
		{"--rpc-max-inflight-bytes", l.rpcMaxInflightBytes < 0},
		{"--rpc-request-timeout", l.rpcRequestTimeout < 0},
		{"--rpc-max-answer-bytes", l.rpcMaxAnswerBytes < 0},
		{"--rpc-max-answer-bytes-total", l.rpcMaxAnswersTotal < 0},
		{"--max-queues", l.maxQueues < 0},
	} {
		if f.neg {
			return fmt.Errorf("%s must not be negative", f.name)
		}
	}
	if l.rpcWriteTimeout <= 0 {
		return errors.New("--rpc-write-timeout must be positive: a client that does not read its answers must not hold them forever")
	}
	if l.maxHTTPConns > 0 && c.maxWaitingPulls > 0 && l.maxHTTPConns <= c.maxWaitingPulls {
		// Otherwise waiting pulls could hold every connection, and no push
		// would get in to end their wait.
		return fmt.Errorf("--max-http-conns (%d) must exceed --max-waiting-pulls (%d)", l.maxHTTPConns, c.maxWaitingPulls)
	}
	if (l.rpcTLSCert == "") != (l.rpcTLSKey == "") {
		return errors.New("--rpc-tls-cert and --rpc-tls-key go together")
	}
	if l.rpcTLSClientCA != "" && l.rpcTLSCert == "" {
		return errors.New("--rpc-tls-client-ca needs --rpc-tls-cert and --rpc-tls-key")
	}
	if c.rpcListen != "" && (c.authToken != "" || c.authBasic != "" || c.tokens) && !loopbackOnly(c.rpcListen) &&
		l.rpcTLSClientCA == "" && !l.rpcAllowUnauthenticated {
		return fmt.Errorf("--rpc-listen %q exposes MessagePack-RPC, which has no authentication, while HTTP requires --auth-token/--auth-basic/--tokens: "+
			"use --rpc-listen 127.0.0.1:18800 (loopback only), --rpc-listen \"\" (off) or --rpc-tls-client-ca (client certificates), "+
			"or accept unauthenticated RPC with --rpc-allow-unauthenticated", c.rpcListen)
	}
	return nil
}

// loopbackOnly reports whether a listen address reaches loopback only:
// "localhost" or a loopback IP. An empty host (all interfaces), another
// name or an unparsable address counts as exposed.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%") // an IPv6 zone
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// timeouts are the HTTP front end's Timeouts of l.
func (l *limits) timeouts() httpapi.Timeouts {
	return httpapi.Timeouts{BodyIdle: l.readBodyIdleTimeout, MinRate: l.minBodyRate, Write: l.writeTimeout}
}

// rpcTLSConfig loads the RPC port's certificate and client CA, if any, so
// that a bad file fails the start rather than the first client.
func (l *limits) rpcTLSConfig() (*tls.Config, error) {
	if l.rpcTLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(l.rpcTLSCert, l.rpcTLSKey)
	if err != nil {
		return nil, fmt.Errorf("--rpc-tls-cert %s / --rpc-tls-key %s: %w", l.rpcTLSCert, l.rpcTLSKey, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if l.rpcTLSClientCA != "" {
		pem, err := os.ReadFile(l.rpcTLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--rpc-tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--rpc-tls-client-ca %s: no PEM certificate", l.rpcTLSClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// noLimitIfZero maps a flag's 0 ("no limit") to -1, the way the rpc package
// spells it (its 0 is "the default").
func noLimitIfZero[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
