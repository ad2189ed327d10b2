package jsapi

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

// Which packages may import nats.go (docs/architecture.md, "Who talks to
// NATS"), by directory or by a pattern ending in "/..." (the packages under
// the directory, as go's package patterns say, but not the directory
// itself). The seam: store and its subpackages for queue data, buckets and
// the core's core-NATS traffic, this package for JetStream's wire names,
// embedded and natsconn for the server and the connection. Beside the core,
// with NATS use of their own: upgrade and migrate (one-off moves of
// streams), the lab tools and the test support.
var natsImporters = map[string]string{
	"store":                     "the seam",
	"store/...":                 "the seam: store's subpackages (store/kv, store/bus)",
	"internal/jsapi":            "the seam: JetStream's wire names",
	"embedded":                  "runs the nats-server",
	"natsconn":                  "the connection to an external NATS",
	"upgrade":                   "beside the core: moves old streams once",
	"migrate":                   "beside the core: copies a running LMQ",
	"tools/lmq-bench":           "lab tool: raw JetStream as a target",
	"tools/lmq-layouts":         "lab tool",
	"internal/lmqtest/testnats": "test support",
	"internal/lmqtest/testcore": "test support",
}

// allowedImporter is why dir (a package directory, slash-separated,
// relative to the module's root) may import nats.go; "" when it may not.
func allowedImporter(dir string) string {
	if why := natsImporters[dir]; why != "" {
		return why
	}
	for pattern, why := range natsImporters {
		if parent, ok := strings.CutSuffix(pattern, "/..."); ok && strings.HasPrefix(dir, parent+"/") {
			return why
		}
	}
	return ""
}

// TestAllowedImporter pins what the patterns of natsImporters match:
// store's subpackages, at any depth, are the seam; a sibling whose name
// only starts with "store" is not.
func TestAllowedImporter(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want bool
	}{
		{"store", true},
		{"store/kv", true},
		{"store/bus", true},
		{"store/kv/x", true},
		{"storex", false},
		{"storex/kv", false},
		{"gateway", false},
		{"gateway/store", false},
		{"internal/jsapi", true},
		{"internal/jsapi/x", false},
	} {
		if got := allowedImporter(tc.dir) != ""; got != tc.want {
			t.Errorf("allowedImporter(%q) = %v, want %v", tc.dir, got, tc.want)
		}
	}
}

// notYetBehindStore are the packages that still import nats.go and are to
// stop (issue 39). The list may only shrink: the test fails when one of
// them no longer imports it, so that the entry is removed with the last use.
// Empty since issue 39 moved the last ones (gateway, gateway/dispatch,
// internal/peers, accumulator, server) behind store/bus (Bus, Msg).
var notYetBehindStore = map[string]string{}

// TestNATSImportersAreTheSeam fails when a package outside the lists above
// imports nats.go in a non-test file, and when a package of
// notYetBehindStore no longer does (remove it from the list).
func TestNATSImportersAreTheSeam(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string][]string{} // package dir → files
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
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
				rel = filepath.ToSlash(rel)
				found[rel] = append(found[rel], filepath.Base(path))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatalf("no importer of nats.go found under %s: is the walk at the module's root?", root)
	}
	dirs := make([]string, 0, len(found))
	for d := range found {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if allowedImporter(d) == "" && notYetBehindStore[d] == "" {
			t.Errorf("%s imports nats.go (%s): only the seam may (store and store/..., internal/jsapi, embedded, natsconn); go through store", d, strings.Join(found[d], ", "))
		}
	}
	for d := range notYetBehindStore {
		if len(found[d]) == 0 {
			t.Errorf("%s no longer imports nats.go: remove it from notYetBehindStore", d)
		}
	}
	t.Logf("not yet behind store: %d packages, %d files", len(notYetBehindStore), func() int {
		n := 0
		for d := range notYetBehindStore {
			n += len(found[d])
		}
		return n
	}())
}
