package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/rpc"
)

func TestLimitFlagsRejected(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"negative idle":        {[]string{"--read-body-idle-timeout", "-1s"}, "--read-body-idle-timeout must not be negative"},
		"negative rate":        {[]string{"--min-body-rate", "-1"}, "--min-body-rate must not be negative"},
		"negative write":       {[]string{"--write-timeout", "-1s"}, "--write-timeout must not be negative"},
		"negative http conns":  {[]string{"--max-http-conns", "-1"}, "--max-http-conns must not be negative"},
		"negative rpc conns":   {[]string{"--max-rpc-conns", "-5"}, "--max-rpc-conns must not be negative"},
		"negative rpc bytes":   {[]string{"--rpc-max-inflight-bytes", "-1"}, "--rpc-max-inflight-bytes must not be negative"},
		"negative queues":      {[]string{"--max-queues", "-1"}, "--max-queues must not be negative"},
		"conns under pulls":    {[]string{"--max-http-conns", "100", "--max-waiting-pulls", "100"}, "must exceed --max-waiting-pulls"},
		"rpc tls half":         {[]string{"--rpc-tls-cert", "c.pem"}, "--rpc-tls-cert and --rpc-tls-key go together"},
		"client ca alone":      {[]string{"--rpc-tls-client-ca", "ca.pem"}, "needs --rpc-tls-cert"},
		"token, rpc default":   {[]string{"--auth-token", "t"}, "--rpc-allow-unauthenticated"},
		"basic, rpc all IPv6":  {[]string{"--auth-basic", "u:p", "--rpc-listen", "[::]:18800"}, "exposes MessagePack-RPC"},
		"token, rpc host name": {[]string{"--auth-token", "t", "--rpc-listen", "gw.example:18800"}, "exposes MessagePack-RPC"},
		"tokens, rpc default":  {[]string{"--tokens"}, "--rpc-allow-unauthenticated"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(tc.args, env(nil), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLimitFlagsAccepted(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":           nil,
		"no auth, open rpc":  {"--rpc-listen", ":18800"},
		"token, loopback":    {"--auth-token", "t", "--rpc-listen", "127.0.0.1:18800"},
		"token, localhost":   {"--auth-token", "t", "--rpc-listen", "localhost:18800"},
		"token, ipv6 lo":     {"--auth-token", "t", "--rpc-listen", "[::1]:18800"},
		"token, rpc off":     {"--auth-token", "t", "--rpc-listen", ""},
		"token, opt-in":      {"--auth-token", "t", "--rpc-allow-unauthenticated"},
		"token, client cert": {"--auth-token", "t", "--rpc-tls-cert", "c", "--rpc-tls-key", "k", "--rpc-tls-client-ca", "ca"},
		"limits off":         {"--max-http-conns", "0", "--max-rpc-conns", "0", "--rpc-max-inflight-bytes", "0", "--read-body-idle-timeout", "0", "--min-body-rate", "0", "--write-timeout", "0", "--max-queues", "0"},
	} {
		if _, err := parseConfig(args, env(nil), &bytes.Buffer{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLimitFlagsInHelp(t *testing.T) {
	wantInHelp(t,
		"(default 30s; env LMQ_READ_BODY_IDLE_TIMEOUT)", "(default 1024; env LMQ_MIN_BODY_RATE)",
		"(default 30s; env LMQ_WRITE_TIMEOUT)", "(default 16384; env LMQ_MAX_HTTP_CONNS)",
		"(default 4096; env LMQ_MAX_RPC_CONNS)", "(default 268435456; env LMQ_RPC_MAX_INFLIGHT_BYTES)",
		"--rpc-allow-unauthenticated", "--rpc-tls-cert FILE", "--rpc-tls-client-ca FILE",
		"(default 100000; env LMQ_MAX_QUEUES)")
}

// TestMaxQueuesLayers: --max-queues comes from a flag, LMQ_MAX_QUEUES or the
// config file, in that order, and reaches the server's configuration.
func TestMaxQueuesLayers(t *testing.T) {
	file := writeFile(t, "max-queues = 7\n")
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want int
	}{
		"default": {nil, nil, 100000},
		"file":    {[]string{"--config", file}, nil, 7},
		"env":     {[]string{"--config", file}, map[string]string{"LMQ_MAX_QUEUES": "8"}, 8},
		"flag":    {[]string{"--config", file, "--max-queues", "9"}, map[string]string{"LMQ_MAX_QUEUES": "8"}, 9},
		"off":     {[]string{"--max-queues", "0"}, nil, 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, tc.args, tc.env)
			if c.limits.maxQueues != tc.want {
				t.Errorf("max-queues %d, want %d", c.limits.maxQueues, tc.want)
			}
			if sc := mustServerConfig(t, c); sc.MaxQueues != tc.want {
				t.Errorf("server MaxQueues %d, want %d", sc.MaxQueues, tc.want)
			}
		})
	}
}

// TestRPCAnswerFlagsToServer: the RPC answer flags' 0 is "no limit", which
// server.Config spells negative (its 0 is the default: issue 40, item 12).
func TestRPCAnswerFlagsToServer(t *testing.T) {
	for name, tc := range map[string]struct {
		args           []string
		perConn, total int
	}{
		"defaults": {nil, rpc.DefaultMaxAnswerBytes, rpc.DefaultMaxTotalAnswers},
		"set":      {[]string{"--rpc-max-answer-bytes", "1000", "--rpc-max-answer-bytes-total", "5000"}, 1000, 5000},
		"off":      {[]string{"--rpc-max-answer-bytes", "0", "--rpc-max-answer-bytes-total", "0"}, -1, -1},
	} {
		t.Run(name, func(t *testing.T) {
			sc := mustServerConfig(t, mustParse(t, tc.args, nil))
			if sc.RPCMaxAnswerBytes != tc.perConn || sc.RPCMaxTotalAnswerBytes != tc.total {
				t.Errorf("server.Config RPC answer bounds %d per connection, %d in total; want %d, %d",
					sc.RPCMaxAnswerBytes, sc.RPCMaxTotalAnswerBytes, tc.perConn, tc.total)
			}
		})
	}
}
