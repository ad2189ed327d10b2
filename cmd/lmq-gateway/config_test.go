package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/server"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lmq.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withConfigFile is args followed, when text is not empty, by --config
// naming a file that holds text.
func withConfigFile(t *testing.T, args []string, text string) []string {
	t.Helper()
	if text == "" {
		return args
	}
	return append(slices.Clip(args), "--config", writeFile(t, text))
}

// mustParse is the configuration args and the environment envs make,
// failing the test when they are refused.
func mustParse(t *testing.T, args []string, envs map[string]string) *config {
	t.Helper()
	c, err := parseConfig(args, env(envs), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustServerConfig is the server configuration c makes, failing the test on
// an error.
func mustServerConfig(t *testing.T, c *config) server.Config {
	t.Helper()
	sc, err := c.serverConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// wantInHelp checks that --help prints each of wants.
func wantInHelp(t *testing.T, wants ...string) {
	t.Helper()
	var out bytes.Buffer
	if _, err := parseConfig([]string{"--help"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range wants {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestConfigPrecedence: flags > environment > config file > defaults.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, `
# every layer sets http-listen; lower layers set more
http-listen = 127.0.0.1:1001
rpc-listen  = 127.0.0.1:2001
data-dir    = "/srv/lmq data"   # quoted: keeps the space
access-log  = false
statsd-interval = 3s
`)
	c, err := parseConfig(
		[]string{"--config", file, "--http-listen", "127.0.0.1:1003"},
		env(map[string]string{"LMQ_HTTP_LISTEN": "127.0.0.1:1002", "LMQ_RPC_LISTEN": "127.0.0.1:2002"}),
		&bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"http-listen (flag)", c.httpListen, "127.0.0.1:1003"},
		{"rpc-listen (env over file)", c.rpcListen, "127.0.0.1:2002"},
		{"data-dir (file)", c.dataDir, "/srv/lmq data"},
		{"nats-listen (default)", c.natsListen, "127.0.0.1:4222"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if c.accessLog || c.statsdInterval != 3*time.Second {
		t.Errorf("file settings: access-log %v, statsd-interval %v", c.accessLog, c.statsdInterval)
	}

	// LMQ_CONFIG names the file when --config does not.
	c, err = parseConfig(nil, env(map[string]string{"LMQ_CONFIG": file}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.httpListen != "127.0.0.1:1001" {
		t.Errorf("file via LMQ_CONFIG: http-listen %q", c.httpListen)
	}

	// A flag set to its default still wins over the environment.
	c, err = parseConfig([]string{"--access-log=true"}, env(map[string]string{"LMQ_ACCESS_LOG": "false"}), &bytes.Buffer{})
	if err != nil || !c.accessLog {
		t.Errorf("explicit --access-log=true under LMQ_ACCESS_LOG=false: %v %v", c.accessLog, err)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		file string
		want string
	}{
		"unknown key":      {file: "nope = 1\n", want: `:1: unknown setting "nope"`},
		"no equals":        {file: "\n\nhttp-listen\n", want: ":3: want name = value"},
		"bad value":        {file: "replicas = many\n", want: ":1: replicas"},
		"nested config":    {file: "config = other\n", want: "cannot name another"},
		"unterminated":     {file: `data-dir = "abc` + "\n", want: "unterminated"},
		"bad env":          {env: map[string]string{"LMQ_REPLICAS": "x"}, want: `LMQ_REPLICAS="x"`},
		"missing file":     {args: []string{"--config", "/nonexistent/lmq.conf"}, want: "config file"},
		"tls half":         {args: []string{"--tls-cert", "c.pem"}, want: "go together"},
		"basic needs pass": {args: []string{"--auth-basic", "user"}, want: "USER:PASSWORD"},
		"extra argument":   {args: []string{"serve"}, want: `unexpected argument "serve"`},
		"replicas 0":       {args: []string{"--replicas", "0"}, want: "--replicas 0: want 1 to 5"},
		"replicas -3":      {env: map[string]string{"LMQ_REPLICAS": "-3"}, want: "--replicas -3: want 1 to 5"},
		"replicas 7":       {file: "replicas = 7\n", want: "--replicas 7: want 1 to 5"},
		"nats-wait < 0":    {args: []string{"--nats-wait", "-1s"}, want: "--nats-wait must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(withConfigFile(t, tc.args, tc.file), env(tc.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestHelpListsDefaultsAndEnv(t *testing.T) {
	wantInHelp(t,
		"precedence", "--config FILE", "--statsd-addr", "(default :9980; env LMQ_HTTP_LISTEN)",
		"--access-log", "(default true; env LMQ_ACCESS_LOG)", "(default 10s; env LMQ_STATSD_INTERVAL)",
		"lmq-gateway status", "lmq-gateway version")
}

func TestSubcommands(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "lmq-gateway ") || !strings.Contains(out.String(), "nats-server") {
		t.Errorf("version: %q", out.String())
	}
	if err := run(context.Background(), []string{"frobnicate"}, &out, &errOut); err == nil {
		t.Error("unknown command accepted")
	}
	if err := run(context.Background(), []string{"status", "--http", "127.0.0.1:1", "--timeout", "2s"}, &out, &errOut); err == nil {
		t.Error("status of nothing succeeded")
	}
}

// TestAllowedOrigins: --allowed-origins, LMQ_ALLOWED_ORIGINS and the config
// file's allowed-origins name the trusted browser origins; a malformed one
// fails the start.
func TestAllowedOrigins(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		file string
		want []string
	}{
		"default":     {want: nil},
		"flag":        {args: []string{"--allowed-origins", "https://a.example, https://b.example:8443,"}, want: []string{"https://a.example", "https://b.example:8443"}},
		"environment": {env: map[string]string{"LMQ_ALLOWED_ORIGINS": "https://a.example"}, want: []string{"https://a.example"}},
		"file":        {file: "allowed-origins = https://a.example,http://b.example\n", want: []string{"https://a.example", "http://b.example"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, withConfigFile(t, tc.args, tc.file), tc.env)
			if got := c.origins(); !slices.Equal(got, tc.want) {
				t.Errorf("origins %q, want %q", got, tc.want)
			}
			if sc := mustServerConfig(t, c); !slices.Equal(sc.AllowedOrigins, tc.want) {
				t.Errorf("server config: %q, want %q", sc.AllowedOrigins, tc.want)
			}
		})
	}
	for _, bad := range []string{"a.example", "https://a.example/path", "https://a.example?q", "https://"} {
		_, err := parseConfig([]string{"--allowed-origins", bad}, env(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--allowed-origins") {
			t.Errorf("--allowed-origins %q: %v, want an error naming the flag", bad, err)
		}
	}
	wantInHelp(t, "--allowed-origins ORIGINS", `(default ""; env LMQ_ALLOWED_ORIGINS)`, "refused 403")
}
