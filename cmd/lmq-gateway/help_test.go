package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// TestSubcommandHelpSpellsDoubleDash: every command's help spells its flags
// "--flag", as the main help does, never "-flag".
func TestSubcommandHelpSpellsDoubleDash(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for cmd, flags := range map[string][]string{
		"status":  {"--http", "--auth-token", "--json", "--timeout"},
		"migrate": {"--from", "--queues", "--dry-run", "--parallel"},
		"names":   {"--json"},
		"token":   {"--http", "--auth-token", "--json"},
		"help":    {"--http-listen", "--ports-file"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{cmd, "--help"}, &stdout, &stderr)
		if cmd == "help" {
			err = run(t.Context(), []string{cmd}, &stdout, &stderr)
		}
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		help := stdout.String() + stderr.String()
		if l := singleDash.FindString(help); l != "" {
			t.Errorf("%s --help has a single-dash flag line %q:\n%s", cmd, l, help)
		}
		for _, f := range flags {
			if !strings.Contains(help, "\n  "+f+" ") && !strings.Contains(help, "\n  "+f+"\n") {
				t.Errorf("%s --help does not list %s:\n%s", cmd, f, help)
			}
		}
	}
}
