package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestLinks checks every link between the README and the pages in docs/:
// a relative link names a file or directory that exists, and its #anchor
// (or a bare #anchor within the page) is a heading of the target, by
// GitHub's rule: lowercase, spaces to '-', punctuation other than '-' and '_'
// dropped, a repeated heading suffixed -1, -2, ….
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join("..", "README.md")}, pages...)
	anchors := map[string]map[string]bool{} // cleaned path → anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		path = filepath.Clean(path)
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(src))
		anchors[path] = a
		return a, nil
	}
	link := regexp.MustCompile(`\]\(([^()\s]+)\)`)
	checked := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(src)) {
			if line == "" {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(stripCodeSpans(line), -1) {
				url := m[1]
				if regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(url) {
					continue // http:, https:, mailto:
				}
				checked++
				file, frag, _ := strings.Cut(url, "#")
				target := page
				if file != "" {
					target = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
					if _, err := os.Stat(target); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", page, n+1, url, target)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(target, ".md") {
					t.Errorf("%s:%d: link %s: an anchor into a file that is not markdown", page, n+1, url)
					continue
				}
				a, err := anchorsOf(target)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", page, n+1, url, err)
				} else if !a[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", page, n+1, url, target, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found; is the link pattern right?", checked)
	}
}

// proseLines returns the lines of a markdown text with those inside fenced
// code blocks (and the fences) blanked, so line numbers stay right.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			lines[i] = ""
			continue
		}
		if fence {
			lines[i] = ""
		}
	}
	return lines
}

// stripCodeSpans removes `code spans`, where brackets are not links.
func stripCodeSpans(l string) string {
	return regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "")
}

// headingAnchors returns the anchors GitHub gives a markdown text's headings.
func headingAnchors(text string) map[string]bool {
	a := map[string]bool{}
	seen := map[string]int{}
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	for _, l := range proseLines(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		slug := githubAnchor(m[1])
		if k := seen[slug]; k > 0 {
			a[slug+"-"+itoa(k)] = true
		} else {
			a[slug] = true
		}
		seen[slug]++
	}
	return a
}

// githubAnchor is GitHub's anchor for a heading: lowercase, spaces to '-',
// every character but letters, digits, '-' and '_' dropped (markdown links
// in the heading count by their text).
func githubAnchor(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestGithubAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Several queues at once: `qre`":                          "several-queues-at-once-qre",
		"Statistics: `GET /stats`":                               "statistics-get-stats",
		"Replies (ack, nack, ext)":                               "replies-ack-nack-ext",
		"Queue control: pause, purge, a limit on work in flight": "queue-control-pause-purge-a-limit-on-work-in-flight",
		"DELETE /queues/NAME/messages — purge (beyond LMQ)":      "delete-queuesnamemessages--purge-beyond-lmq",
	} {
		if got := githubAnchor(h); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", h, got, want)
		}
	}
}
