package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestConsumerStorageSetting: --consumer-storage is memory by default, file
// by flag, environment or config file, reaches the server's configuration,
// and refuses other values; --help names it with its default.
func TestConsumerStorageSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		file string
		want bool // FileConsumers
	}{
		{name: "default", want: false},
		{name: "flag memory", args: []string{"--consumer-storage", "memory"}, want: false},
		{name: "flag file", args: []string{"--consumer-storage", "file"}, want: true},
		{name: "env", env: map[string]string{"LMQ_CONSUMER_STORAGE": "file"}, want: true},
		{name: "file", file: "consumer-storage = file\n", want: true},
		{name: "flag over env", args: []string{"--consumer-storage", "memory"}, env: map[string]string{"LMQ_CONSUMER_STORAGE": "file"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			c, err := parseConfig(args, env(tc.env), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			sc, err := c.serverConfig(slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if sc.FileConsumers != tc.want {
				t.Errorf("FileConsumers %v, want %v", sc.FileConsumers, tc.want)
			}
		})
	}
	for _, bad := range []string{"disk", "", "Memory"} {
		_, err := parseConfig([]string{"--consumer-storage", bad}, env(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "want memory or file") {
			t.Errorf("--consumer-storage %q: error %v, want one naming memory or file", bad, err)
		}
	}
	var out bytes.Buffer
	if _, err := parseConfig([]string{"--help"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if !strings.Contains(out.String(), "(default memory; env LMQ_CONSUMER_STORAGE)") {
		t.Errorf("--help lacks --consumer-storage with its default:\n%s", out.String())
	}
}
