package main

import (
	"bytes"
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
			sc := mustServerConfig(t, mustParse(t, withConfigFile(t, tc.args, tc.file), tc.env))
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
	wantInHelp(t, "(default memory; env LMQ_CONSUMER_STORAGE)")
}
