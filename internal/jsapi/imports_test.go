package jsapi_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// natsImporters are the packages whose non-test files may import nats.go
// (github.com/nats-io/nats.go and its jetstream package), by directory, and
// why (docs/architecture.md, "Who talks to NATS"). Directories under cmd/ and
// tools/ (lab tools and the binary's subcommands) may too.
var natsImporters = map[string]string{
	// The seam: JetStream's queue data, its wire and the NATS connection.
	"store":          "the one seam between the core and JetStream",
	"internal/jsapi": "JetStream's wire subjects, headers and API error codes",
	"embedded":       "runs the in-process nats-server",
	"natsconn":       "connects to an external NATS deployment",
	// Beside the core: one-time moves into the shards, with their own
	// JetStream handles.
	"upgrade": "the one-time layout upgrade, run before anything is served",
	"migrate": "copies a running LMQ into JetStream",
	// Test support built on a real server.
	"internal/testnats": "test support: an embedded server and clients",
	"internal/testcore": "test support: a real core on an embedded server",
	// Not yet behind the store (issue 39): each imports nats.go for the
	// uses named, to move behind package store.
	"gateway":          "*nats.Msg of stores and deliveries, *nats.Conn and subscriptions (relayed replies, delivery lookups, rates), nats.ErrNoResponders",
	"gateway/dispatch": "the pull wire: *nats.Msg of a pulled message (Raw.Msg), the pull-reply and notification subscriptions",
	"accumulator":      "its subscription for close requests between gateways",
	"server":           "opens and watches the core's NATS connection",
	"internal/peers":   "heartbeats between gateways on a subscription",
}

// TestNATSImporters: only the packages of natsImporters import nats.go in
// non-test files, and each of them still does (a package that stopped comes
// off the list, so that the list stays the truth).
func TestNATSImporters(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	importing := make(map[string]bool)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "examples") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "github.com/nats-io/nats.go" || strings.HasPrefix(p, "github.com/nats-io/nats.go/") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				importing[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for dir := range importing {
		if natsImporters[dir] == "" && !strings.HasPrefix(dir, "cmd/") && !strings.HasPrefix(dir, "tools/") {
			extra = append(extra, dir)
		}
	}
	sort.Strings(extra)
	for _, dir := range extra {
		t.Errorf("%s imports nats.go: only the store and the packages listed in natsImporters may (docs/architecture.md, Who talks to NATS)", dir)
	}
	for dir := range natsImporters {
		if !importing[dir] {
			t.Errorf("%s no longer imports nats.go: take it off natsImporters (and docs/architecture.md, Who talks to NATS)", dir)
		}
	}
}
