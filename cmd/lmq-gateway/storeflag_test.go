package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestMaxStoreFlag: --max-store (LMQ_MAX_STORE, the config file) reads
// sizes with units, "auto" is the default, and it reaches the embedded
// server's options.
func TestMaxStoreFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		file string
		want int64
	}{
		{want: 0},
		{args: []string{"--max-store", "64MB"}, want: 64_000_000},
		{args: []string{"--max-store=10GiB"}, want: 10 << 30},
		{args: []string{"--max-store", "1.5 TB"}, want: 1_500_000_000_000},
		{args: []string{"--max-store", "auto"}, want: 0},
		{args: []string{"--max-store", "1048576"}, want: 1 << 20},
		{env: map[string]string{"LMQ_MAX_STORE": "512MiB"}, want: 512 << 20},
		{file: "max-store = 2gb\n", want: 2_000_000_000},
		{args: []string{"--max-store", "3GiB"}, env: map[string]string{"LMQ_MAX_STORE": "512MiB"}, want: 3 << 30},
	} {
		c := mustParse(t, withConfigFile(t, tc.args, tc.file), tc.env)
		if int64(c.maxStore) != tc.want {
			t.Errorf("%v %v %q: max-store %d, want %d", tc.args, tc.env, tc.file, c.maxStore, tc.want)
		}
		if got := mustServerConfig(t, c).Embedded.MaxStore; got != tc.want {
			t.Errorf("%v %v %q: embedded MaxStore %d, want %d", tc.args, tc.env, tc.file, got, tc.want)
		}
	}
	wantInHelp(t, "--max-store SIZE", "(default auto; env LMQ_MAX_STORE)", "75% of the --data-dir file system's size")
}

func TestMaxStoreFlagErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		file string
		want string
	}{
		"no unit number":   {args: []string{"--max-store", "lots"}, want: "not a size"},
		"negative":         {args: []string{"--max-store", "-5GB"}, want: "not a size"},
		"ambiguous unit":   {args: []string{"--max-store", "10G"}, want: "not a size"},
		"exponent":         {args: []string{"--max-store", "1e9"}, want: "not a size"},
		"too large":        {args: []string{"--max-store", "9999999TiB"}, want: "too large"},
		"too small":        {args: []string{"--max-store", "64KiB"}, want: "at least 1MiB"},
		"bad env":          {env: map[string]string{"LMQ_MAX_STORE": "ten gigs"}, want: `LMQ_MAX_STORE="ten gigs"`},
		"bad file":         {file: "max-store = 12 parsecs\n", want: ":1: max-store"},
		"with --nats-url":  {args: []string{"--nats-url", "nats://127.0.0.1:4222", "--max-store", "1GB"}, want: "--max-store is the embedded server's"},
		"env and nats-url": {args: []string{"--nats-url", "nats://127.0.0.1:4222"}, env: map[string]string{"LMQ_MAX_STORE": "1GB"}, want: "max_file_store"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(withConfigFile(t, tc.args, tc.file), env(tc.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// auto with --nats-url is the default: accepted.
	mustParse(t, []string{"--nats-url", "nats://127.0.0.1:4222", "--max-store", "auto"}, nil)
}
