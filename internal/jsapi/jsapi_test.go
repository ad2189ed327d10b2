package jsapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneSpeller: no non-test Go file outside this package spells a
// JetStream subject or API name in a string literal; they come from here (or
// from nats.go's own APIs), so that domains, API prefixes and layouts are
// handled in one place. Acknowledgement bodies and Nats- headers may also be
// spelled in store and its subpackages (store/...), embedded and natsconn
// (issue 39).
func TestOneSpeller(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	wire := []string{"$JS.", "$KV.", "$O.", "STREAM.", "CONSUMER.", "KV_", "OBJ_"}
	// JetStream's acknowledgement bodies and its headers: spelled here, or
	// in the packages that are JetStream's seam (store and store/...) or
	// run the server (embedded) or the connection (natsconn).
	vocab := []string{"+ACK", "+WPI", "+NAK", "+TERM", "Nats-"}
	seam := map[string]bool{"store": true, "embedded": true, "natsconn": true}
	inSeam := func(dir string) bool { return seam[dir] || strings.HasPrefix(dir, "store/") }
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		seamFile := inSeam(filepath.ToSlash(rel))
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, w := range wire {
				if strings.HasPrefix(s, w) || strings.Contains(s, "."+w) {
					t.Errorf("%s: %s spells JetStream's wire (%q): use package jsapi", fset.Position(lit.Pos()), lit.Value, w)
				}
			}
			for _, w := range vocab {
				if !seamFile && strings.HasPrefix(s, w) {
					t.Errorf("%s: %s spells JetStream's acknowledgements or headers (%q) outside store: use package jsapi or store", fset.Position(lit.Pos()), lit.Value, w)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: is the walk at the module's root (%s)?", checked, root)
	}
}
