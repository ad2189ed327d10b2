package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The examples of the README and of docs/*.md are checked by running them:
// every ```sh block that follows a line starting with "<!-- readme-test" is
// run with bash, README.md first, then docs/*.md in name order, each file in
// its own order, against one gateway started by the harness (localhost:9980 replaced
// by its address; ./data is its data directory, so data/nats-client.url is
// its NATS URL). A marker containing "nats" marks a block that needs the nats
// CLI; it is skipped when that is not installed.
//
// What the README shows is what the test expects, as far as it is written in
// a machine-readable form:
//   - a comment at the end of a command ("cmd   # 204: done") starting with
//     a status code: the status line that curl -i printed;
//   - such a comment starting with "{" or "[", or the first comment line
//     under a command starting so ("# {"accum":"no"}"): the JSON body, where
//     "…" stands for any value;
//   - "x-lmq-NAME: VALUE" in a command's end comment: that response header.
// Every command must succeed (the block runs under set -e -o pipefail).

const readmeMarker = "<!-- readme-test"

// readmeCmd is one top-level command of a block and what the README says
// it prints.
type readmeCmd struct {
	file    string // README.md or docs/NAME.md
	line    int    // line of its first line
	text    string // as written, possibly several lines
	status  int    // expected HTTP status; 0: none given
	json    string // expected JSON body; "": none given
	headers [][2]string
}

type readmeBlock struct {
	file string // README.md or docs/NAME.md
	line int    // line of the opening fence
	nats bool
	cmds []*readmeCmd
}

var (
	readmeEndComment = regexp.MustCompile(`\s{2,}#\s+(.*)$`)
	readmeStatus     = regexp.MustCompile(`^(\d{3})\b`)
	readmeHeader     = regexp.MustCompile(`\b(x-lmq-[a-z-]+): ([^\s,;()]+)`)
	readmeOutMarker  = regexp.MustCompile(`\n@@readme-cmd (\d+)@@\n`)
)

// parseReadme returns the marked blocks of a markdown file's text.
func parseReadme(t testing.TB, file, text string) []readmeBlock {
	t.Helper()
	lines := strings.Split(text, "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), readmeMarker) {
			continue
		}
		b := readmeBlock{file: file, nats: strings.Contains(lines[i], "nats")}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || strings.TrimSpace(lines[j]) != "```sh" {
			t.Fatalf("%s line %d: %s is not followed by a ```sh block", file, i+1, readmeMarker)
		}
		b.line = j + 1
		k := j + 1
		for k < len(lines) && strings.TrimSpace(lines[k]) != "```" {
			k++
		}
		if k == len(lines) {
			t.Fatalf("%s line %d: ```sh block not closed", file, j+1)
		}
		b.cmds = parseCommands(lines[j+1:k], j+2)
		for _, c := range b.cmds {
			c.file = file
		}
		blocks = append(blocks, b)
		i = k
	}
	return blocks
}

// parseCommands splits a block into top-level commands (a loop or an if is
// one command; lines ending in a backslash continue) and reads what the
// README says each prints. first is the README line number of lines[0].
func parseCommands(lines []string, first int) []*readmeCmd {
	var cmds []*readmeCmd
	var cur *readmeCmd // the last command, while comment lines may follow it
	depth := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		switch {
		case trim == "":
			if depth == 0 {
				cur = nil
			}
			continue
		case strings.HasPrefix(trim, "#"):
			if cur != nil && depth == 0 && cur.json == "" {
				cur.json = jsonPrefix(strings.TrimSpace(strings.TrimPrefix(trim, "#")))
			}
			continue
		}
		text := l
		for strings.HasSuffix(strings.TrimSpace(lines[i]), `\`) && i+1 < len(lines) {
			i++
			text += "\n" + lines[i]
		}
		last := lines[i]
		code := strings.TrimSpace(readmeEndComment.ReplaceAllString(last, ""))
		opens := regexp.MustCompile(`^(for|while|until|if)\s`).MatchString(strings.TrimSpace(text))
		closes := regexp.MustCompile(`(^|[;\s])(done|fi)$`).MatchString(code)
		if depth > 0 {
			cur.text += "\n" + text
		} else {
			cur = &readmeCmd{line: first + i - strings.Count(text, "\n"), text: text}
			cmds = append(cmds, cur)
			if m := readmeEndComment.FindStringSubmatch(last); m != nil {
				c := m[1]
				if s := readmeStatus.FindStringSubmatch(c); s != nil {
					cur.status, _ = strconv.Atoi(s[1])
				} else {
					cur.json = jsonPrefix(c)
				}
				for _, h := range readmeHeader.FindAllStringSubmatch(c, -1) {
					cur.headers = append(cur.headers, [2]string{h[1], h[2]})
				}
			}
		}
		if opens && !closes {
			depth++
		} else if closes && !opens && depth > 0 {
			depth--
		}
	}
	return cmds
}

// jsonPrefix returns the JSON object or array s starts with ("" if none):
// brackets balanced outside strings.
func jsonPrefix(s string) string {
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return ""
	}
	depth, inStr, esc := 0, false, false
	for i, c := range s {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return s[:i+1]
			}
		}
	}
	return ""
}

// jsonMatches compares a decoded body with the README's JSON, in which the
// string "…" (written as a bare … in the README) matches any value.
func jsonMatches(want, got any) bool {
	if w, ok := want.(string); ok && w == "…" {
		return true
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonMatches(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonMatches(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(want) == fmt.Sprint(got)
	}
}

// TestReadmeExamples runs the README's marked shell blocks against a live
// gateway and compares what they print with what the README shows.
func TestReadmeExamples(t *testing.T) {
	heavy(t, "every README example, run against a gateway (about 30 s)")
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README examples need %s, not found on PATH: %v", tool, err)
		}
	}
	blocks := readmeBlocks(t)
	if len(blocks) < 2 || blocks[0].file != "README.md" {
		t.Fatalf("%d blocks marked %q; the README's first session at least should be", len(blocks), readmeMarker)
	}
	perFile := map[string]int{}
	for _, b := range blocks {
		perFile[b.file]++
	}
	t.Logf("marked blocks per file: %v", perFile)

	gw := Start(t)
	host := strings.TrimPrefix(gw.HTTP, "http://")

	// The blocks run in a directory where ./data is the gateway's data
	// directory and bin/ holds lmq-gateway (and nats, if installed).
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(gw.DataDir, filepath.Join(work, "data")); err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(gatewayBinary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "lmq-gateway")); err != nil {
		t.Fatal(err)
	}
	natsCLI, err := exec.LookPath("nats")
	if err != nil {
		natsCLI = filepath.Join(goBinDir(), "nats")
		if _, err := os.Stat(natsCLI); err != nil {
			natsCLI = ""
		}
	}
	if natsCLI != "" {
		if err := os.Symlink(natsCLI, filepath.Join(bin, "nats")); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_PROXY=*", "no_proxy=*", "HTTP_PROXY=", "http_proxy=", "NATS_CONTEXT=", "NATS_URL=",
	)

	for _, b := range blocks {
		if b.nats && natsCLI == "" {
			t.Logf("%s line %d: skipped, the nats CLI is not installed (go install github.com/nats-io/natscli/nats@latest)", b.file, b.line)
			continue
		}
		runReadmeBlock(t, b, host, work, env)
		if b.nats {
			// The point of the block: streams say which queue they hold.
			t.Logf("%s line %d: ran with %s", b.file, b.line, natsCLI)
		}
	}
}

// readmeBlocks returns the marked blocks of README.md, then of docs/*.md in
// name order: the walkthroughs moved from the README to docs/ stay executed.
func readmeBlocks(t testing.TB) []readmeBlock {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	var blocks []readmeBlock
	for _, path := range append([]string{filepath.Join("..", "README.md")}, docs...) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("..", path)
		blocks = append(blocks, parseReadme(t, filepath.ToSlash(rel), string(src))...)
	}
	return blocks
}

// runReadmeBlock runs one block and checks each command's output.
func runReadmeBlock(t *testing.T, b readmeBlock, host, dir string, env []string) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -e -o pipefail\n")
	for i, c := range b.cmds {
		fmt.Fprintf(&script, "printf '\\n@@readme-cmd %d@@\\n'\n%s\n", i, strings.ReplaceAll(c.text, "localhost:9980", host))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s block at line %d failed: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s",
			b.file, b.line, err, script.String(), stdout.String(), stderr.String())
	}
	outs := splitReadmeOutput(stdout.String())
	for i, c := range b.cmds {
		out, ok := outs[i]
		if !ok {
			t.Errorf("%s line %d: no output section for %q", c.file, c.line, c.text)
			continue
		}
		checkReadmeCmd(t, c, out)
	}
	if b.nats && !strings.Contains(stdout.String(), `lmq queue "sensor/42"`) {
		t.Errorf("%s line %d: nats stream ls does not show the queue name:\n%s", b.file, b.line, stdout.String())
	}
}

func splitReadmeOutput(s string) map[int]string {
	outs := map[int]string{}
	idx := readmeOutMarker.FindAllStringSubmatchIndex(s, -1)
	for k, m := range idx {
		n, _ := strconv.Atoi(s[m[2]:m[3]])
		end := len(s)
		if k+1 < len(idx) {
			end = idx[k+1][0]
		}
		outs[n] = s[m[1]:end]
	}
	return outs
}

func checkReadmeCmd(t *testing.T, c *readmeCmd, out string) {
	t.Helper()
	body := out
	status := 0
	var hdr map[string]string
	if strings.HasPrefix(out, "HTTP/") {
		head, rest, _ := strings.Cut(out, "\r\n\r\n")
		body = rest
		hdr = map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(head))
		for first := true; sc.Scan(); first = false {
			if first {
				if f := strings.Fields(sc.Text()); len(f) >= 2 {
					status, _ = strconv.Atoi(f[1])
				}
				continue
			}
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
				hdr[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	where := fmt.Sprintf("%s line %d (%s)", c.file, c.line, strings.SplitN(c.text, "\n", 2)[0])
	if c.status != 0 && status != c.status {
		t.Errorf("%s: status %d, the README shows %d; output:\n%s", where, status, c.status, out)
	}
	for _, h := range c.headers {
		if hdr == nil {
			t.Errorf("%s: the README shows header %s but the command prints no headers (curl -i?)", where, h[0])
		} else if got := hdr[h[0]]; got != h[1] {
			t.Errorf("%s: header %s is %q, the README shows %q", where, h[0], got, h[1])
		}
	}
	if c.json == "" {
		return
	}
	var want, got any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(c.json, "…", `"…"`)), &want); err != nil {
		t.Errorf("%s: the README's JSON %s does not parse: %v", where, c.json, err)
		return
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &got); err != nil || !jsonMatches(want, got) {
		t.Errorf("%s: printed %q, the README shows %s", where, strings.TrimSpace(body), c.json)
	}
}

// goBinDir is where go install puts programs (GOBIN, or GOPATH's first
// element's bin, GOPATH defaulting to ~/go), which need not be on PATH.
func goBinDir() string {
	if d := os.Getenv("GOBIN"); d != "" {
		return d
	}
	gopath := filepath.SplitList(os.Getenv("GOPATH"))
	if len(gopath) > 0 && gopath[0] != "" {
		return filepath.Join(gopath[0], "bin")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, "go", "bin")
}
