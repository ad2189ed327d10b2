package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutMatchesTree: the "Repository layout" table of
// docs/architecture.md (linked from the README) is where a
// newcomer looks for a behaviour's home, so it must name every directory at
// the top of the tree and every Go package below it, and name nothing that
// is gone. A package is named by its path in backquotes (`gateway/view`,
// `internal/route`) or, under internal/, by its path below internal/
// (`kvfollow`, `lmqtest/testwait`).
func TestReadmeLayoutMatchesTree(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start := strings.Index(text, "\n## Repository layout\n")
	if start < 0 {
		t.Fatal(`docs/architecture.md has no "## Repository layout" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_./-]+)`").FindAllStringSubmatch(section, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}

	// Every row names an existing path.
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_./-]+)`").FindAllStringSubmatch(section, -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("the Layout table names %s, which is not in the tree", m[1])
		}
	}

	root := ".."
	tops, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tops {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "data" {
			continue
		}
		if !named[e.Name()] && !namedBelow(named, e.Name()) {
			t.Errorf("the Layout table does not name the directory %s/", e.Name())
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if strings.Count(rel, string(filepath.Separator)) == 0 || !hasGoSource(path) {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if named[rel] {
			return nil
		}
		if after, ok := strings.CutPrefix(rel, "internal/"); ok && named[after] {
			return nil
		}
		t.Errorf("the Layout table does not name the package %s", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// namedBelow reports whether the table names a path under dir (cmd/ is
// named by its commands).
func namedBelow(named map[string]bool, dir string) bool {
	for n := range named {
		if strings.HasPrefix(n, dir+"/") {
			return true
		}
	}
	return false
}

// hasGoSource reports whether dir holds a non-test Go file.
func hasGoSource(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}
