package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The web console (issue 17) in a real headless Chromium against the real
// binary. The tests skip when no Chromium can be found; .ci/run installs
// Debian's chromium when it is missing.
//
// LMQ_UPDATE_SCREENSHOTS=1 makes TestConsolePages write docs/console-*.png
// (the README and docs/console.md show them); otherwise the repository is left alone.

// browserTimeout bounds one test's browser session: a safety net against a
// hung browser, not a performance requirement (every wait polls for its
// condition).
const browserTimeout = 3 * time.Minute

// chromiumPath finds a Chromium or Chrome binary: $LMQ_CHROMIUM, else the
// usual names in PATH.
func chromiumPath() string {
	if p := os.Getenv("LMQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium is the package's one headless Chromium, which every console
// test opens its tabs in: a browser started per test cost each test a
// Chromium start (seconds of CPU on a loaded machine, with 8 tests at
// once) and its own set of processes. TestMain stops it.
var chromium sharedChromium

type sharedChromium struct {
	mu     sync.Mutex
	ctx    context.Context // the browser's (its first tab's) chromedp context
	cancel func()
}

// get returns the browser's context, starting Chromium (exe) on first use.
func (c *sharedChromium) get(t *testing.T, exe string) context.Context {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil && c.ctx.Err() == nil {
		return c.ctx
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
		// On a loaded machine (the whole suite at once on 2 cores) Chromium
		// may take longer than chromedp's default 20 s to come up.
		chromedp.WSURLReadTimeout(90*time.Second),
	)
	for attempt := 1; ; attempt++ {
		// A fresh profile each time: a Chromium that died may leave its
		// lock. (Not t.TempDir: the browser outlives the test.)
		dir, err := os.MkdirTemp("", "lmq-e2e-chromium-")
		if err != nil {
			t.Fatal(err)
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, chromedp.UserDataDir(dir))...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		stop := func() {
			cancelBrowser()
			cancelAlloc()
			os.RemoveAll(dir)
		}
		// Start the browser and its first tab: on bctx itself, as the first
		// Do binds the browser's life to its context (the start is bounded
		// by WSURLReadTimeout).
		if err = chromedp.Do(bctx); err == nil {
			c.ctx, c.cancel = bctx, stop
			return c.ctx
		}
		stop()
		if attempt == 3 {
			t.Fatalf("start chromium %s (%d attempts): %v", exe, attempt, err)
		}
		t.Logf("start chromium %s: %v; trying again", exe, err)
	}
}

// stop ends the browser, if it was started.
func (c *sharedChromium) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.ctx, c.cancel = nil, nil
	}
}

// browser is one headless Chromium tab, recording the page's console errors
// and uncaught exceptions.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu     sync.Mutex
	errors []string
	// allowed are substrings of console messages the test provokes on
	// purpose (a 400 it checks is shown).
	allowed []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		const missing = "no Chromium found (chromium, chromium-browser, google-chrome, google-chrome-stable or headless-shell in PATH, or LMQ_CHROMIUM)"
		if os.Getenv("LMQ_REQUIRE_CHROMIUM") == "1" {
			// CI (.ci/run) installs one and sets this: a failed install
			// must not turn every console test into a silent skip.
			t.Fatal(missing + ", and LMQ_REQUIRE_CHROMIUM=1 requires the console's browser tests to run")
		}
		t.Skip(missing + ": install Debian's chromium to run the console's browser tests (LMQ_REQUIRE_CHROMIUM=1 makes this a failure)")
	}
	// A tab of the package's one Chromium, in a browser context of its own
	// (its own storage, cookies and cache, like a fresh profile), disposed
	// of with the tab when the test ends.
	tctx, cancelTab := chromedp.NewContext(chromium.get(t, exe), chromedp.WithNewBrowserContext())
	tctx, cancelTime := context.WithTimeout(tctx, browserTimeout)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
	})
	if err := chromedp.Do(tctx); err != nil {
		t.Fatalf("open a tab in chromium %s: %v", exe, err)
	}
	b := &browser{t: t, ctx: tctx, base: base}
	// Follow the tab's console: calls of console.error, uncaught exceptions
	// and the browser's own error log (failed loads, refused content).
	msgs := chromedp.Console(tctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.record(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
			}
		}
	}()
	return b
}

func (b *browser) record(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.allowed {
		if strings.Contains(msg, a) {
			return
		}
	}
	b.errors = append(b.errors, msg)
}

// allow ignores console messages containing s from now on.
func (b *browser) allow(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, s)
}

// noErrors fails the test if the page logged an error or threw.
func (b *browser) noErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		b.t.Errorf("browser console: %s", e)
	}
	b.errors = nil
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// open loads a console route ("#/queues").
func (b *browser) open(route string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base + "/ui/" + route))
}

// waitJS polls a JavaScript expression until it is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText.slice(0, 2000) : ''`))
		b.t.Fatalf("waiting for %s (%s): %v\npage shows:\n%s", what, expr, err, state)
	}
}

// waitText polls until the element sel has exactly the text want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s to read %q", sel, want),
		fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!el && el.textContent.trim() === %s; })()`, jsString(sel), jsString(want)))
}

// waitContains polls until the element sel's text contains want.
func (b *browser) waitContains(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s to contain %q", sel, want),
		fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!el && el.textContent.includes(%s); })()`, jsString(sel), jsString(want)))
}

// choose picks an option of a select, as a person does (input and change).
func (b *browser) choose(sel, value string) {
	b.t.Helper()
	b.run(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = document.querySelector(%s); el.focus(); el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); })()`, jsString(sel), jsString(value))))
}

// setValue types text into an input (replacing what is there).
func (b *browser) setValue(sel, text string) {
	b.t.Helper()
	// Cleared by script (chromedp's SetValue refuses ""), with the input
	// event a person's editing makes; then typed key by key.
	b.run(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = document.querySelector(%s); el.focus(); el.value = ''; el.dispatchEvent(new Event('input', {bubbles: true})); })()`, jsString(sel))))
	if text != "" {
		b.run(chromedp.SendKeys(chromedp.CSS(sel), text))
	}
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// labelled fails the test unless every form field of the page has a label
// and every button a name (what a screen reader announces).
func (b *browser) labelled(page string) {
	b.t.Helper()
	missing, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[
		...Array.from(document.querySelectorAll('input, select, textarea'))
			.filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
			.map(el => el.outerHTML.slice(0, 120)),
		...Array.from(document.querySelectorAll('button'))
			.filter(el => !el.textContent.trim() && !el.getAttribute('aria-label'))
			.map(el => el.outerHTML.slice(0, 120)),
	]`))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, m := range missing {
		b.t.Errorf("%s page: no label: %s", page, m)
	}
}

// screenshot saves the viewport as docs/console-<name>.png when
// LMQ_UPDATE_SCREENSHOTS=1.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("LMQ_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join("..", "docs", "console-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowSel is the selector of a queue's cell in the queue list.
func rowSel(queue, col string) string {
	return fmt.Sprintf(`tr[data-queue=%s] td[data-col=%q]`, jsString(queue), col)
}

// TestConsolePages walks every page of the console: the queue list
// follows pushes made through the API, the filter reports an invalid
// regexp inline, a property edited in the page is what the API returns, a
// dead letter is respawned from the page, the default-list tester and the
// cluster page answer; and the browser logs no error throughout.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	b := newBrowser(t, g.HTTP)

	c.Expect(http.StatusNoContent, http.MethodPut, "/props", []byte(`[["^jobs/",{"retry":5}],["^mail",{"timeout":60,"ttl":3600}]]`), "Content-Type", "application/json")
	c.Push("jobs/resize", []byte(`{"image":"cat.png","width":640}`), "application/json")
	for i := range 3 {
		c.Push(fmt.Sprintf("mail-%d", i), []byte("hello"), "text/plain")
	}
	c.PatchProps("reports", `{"dead_letter":true,"retry":0}`)

	// Queues: the list shows the push, then follows more.
	b.open("#/queues")
	b.waitText(rowSel("jobs/resize", "waiting"), "1")
	c.Push("jobs/resize", []byte(`{"image":"dog.png","width":320}`), "application/json")
	c.Push("jobs/resize", []byte{0, 1, 2, 0xff}, "application/octet-stream")
	b.waitText(rowSel("jobs/resize", "waiting"), "3")
	b.waitJS("an oldest age", `document.querySelector(`+jsString(rowSel("jobs/resize", "oldest_age"))+`).textContent.trim() !== '–'`)
	// Human times: a readable age, the exact local time (no fraction of a
	// second) on hover.
	b.waitJS("a human age with the exact time on hover", `(() => {
		const el = document.querySelector(`+jsString(rowSel("jobs/resize", "oldest_age")+" .age")+`);
		return el && /^\d+(\.\d)? s$|min/.test(el.textContent) && /^pushed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/.test(el.title);
	})()`)
	// The rates of the last hours: this gateway's and the cluster's.
	b.waitContains("#rates-note", "gateway(s) heard now")
	b.click(`#rates button[data-scope="this"]`)
	b.waitContains("#rates-note", "This gateway (")
	b.waitJS("a chart or its wait", `!!document.querySelector('#rates-chart svg, #rates-chart [data-collecting]')`)
	b.screenshot("queues")
	b.labelled("queues")

	// The filter: an invalid regexp is explained inline (a 400 the test
	// provokes, which the browser logs), a valid one narrows the list.
	b.allow("status of 400")
	b.setValue("#filter", "jobs/(")
	b.waitContains("#filter-error", "missing closing )")
	b.setValue("#filter", "^mail-[12]$")
	b.waitJS("the filtered list", `document.querySelectorAll('#queues tbody tr[data-queue]').length === 2 && !document.querySelector('tr[data-queue="mail-0"]')`)
	b.waitContains("#summary", "of 2 matching")
	// Sorting by a column, descending.
	b.setValue("#filter", "^mail-")
	b.waitJS("three mail queues", `document.querySelectorAll('#queues tbody tr[data-queue]').length === 3`)
	b.click(`button[data-sort="name"]`)
	b.waitJS("descending names", `Array.from(document.querySelectorAll('#queues tbody tr[data-queue]')).map(r => r.dataset.queue).join() === 'mail-2,mail-1,mail-0'`)
	b.setValue("#filter", "")
	b.waitJS("the whole list", `document.querySelectorAll('#queues tbody tr[data-queue]').length === 5`)

	// Queue: sizes, where properties come from, peek, edit.
	b.open("#/queue/" + Q("jobs/resize"))
	b.waitText(`[data-stat="waiting"]`, "3")
	b.waitContains(`tr[data-prop="retry"]`, "default entry 1")
	b.waitJS("three peeked messages", `document.querySelectorAll('#peek article').length === 3`)
	b.waitContains(`#peek article[data-seq] pre[data-kind="json"]`, `"image": "cat.png"`)
	b.waitContains(`#peek article:nth-of-type(3) pre[data-kind="hex"]`, "00 01 02 ff")
	b.screenshot("queue")
	b.labelled("queue")
	// Peeking took nothing.
	if r := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q("jobs/resize"), nil); !strings.Contains(string(r.Body), `"size":3`) {
		t.Fatalf("after the peek: %s", r.Body)
	}
	// A queue that keeps no dead letters shows no dead-letter actions.
	b.waitJS("no dead-letter section", `document.querySelector('#dead-section').hidden && !document.querySelector('#respawn').offsetParent`)
	// Nor a "paused" badge when it is not paused (the hidden attribute wins
	// over the badge's display).
	b.waitJS("no paused badge", `!document.querySelector('#paused-badge').offsetParent`)
	// Every property has a field, filled with the effective value.
	for _, k := range []string{"accum", "retry", "timeout", "ttl", "dead_letter", "release_on_disconnect", "priority", "paused", "max_inflight", "dead_letter_queue", "hooks"} {
		b.waitJS("the field of "+k, `!!document.querySelector('#prop-`+k+`')`)
	}
	b.waitJS("the retry field", `document.querySelector('#prop-retry').value === '5'`)
	// An invalid value: the API's 400 text, inline.
	b.setValue("#prop-timeout", "soon")
	b.click("#props-save")
	b.waitContains("#props-error", "timeout")
	b.setValue("#prop-timeout", "30")
	b.setValue("#prop-retry", "7")
	b.click("#props-save")
	b.waitContains(`tr[data-prop="retry"]`, "this queue")
	if got := c.Props("jobs/resize"); !strings.Contains(got, `"retry":7`) {
		t.Fatalf("properties after the edit in the page: %s", got)
	}
	// The newer properties, from the form; only what changed is sent (the
	// queue's own properties do not get the unchanged timeout).
	b.setValue("#prop-priority", "4")
	b.choose("#prop-release_on_disconnect", "true")
	b.setValue("#prop-dead_letter_queue", "jobs/dead")
	b.click("#props-save")
	b.waitContains(`tr[data-prop="priority"]`, "this queue")
	var own struct {
		Own map[string]any `json:"own"`
	}
	if r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queue?name="+Q("jobs/resize"), nil); json.Unmarshal(r.Body, &own) != nil ||
		own.Own["priority"] != 4.0 || own.Own["release_on_disconnect"] != true || own.Own["dead_letter_queue"] != "jobs/dead" || own.Own["retry"] != 7.0 || len(own.Own) != 4 {
		t.Fatalf("own properties after the second edit: %s", r.Body)
	}
	// A test message pushed from the page.
	b.setValue("#push-body", "from the console")
	b.setValue("#push-type", "text/plain")
	b.click("#push")
	b.waitText(`[data-stat="waiting"]`, "4")

	// Dead letters: one is made through the API, respawned from the page.
	c.Push("reports", []byte("quarterly"), "text/plain")
	r := c.MustPull("reports", msgWait, "quarterly")
	c.ExpectReply(http.StatusNoContent, "reports", r.ID(), "nack")
	b.open("#/queue/reports")
	b.waitText(`[data-stat="dead_letters"]`, "1")
	b.waitContains("#dead-list article", "quarterly")
	b.waitContains("#dead-list article .meta", "died ")
	b.waitJS("when it died, in words and exactly", `(() => {
		const el = Array.from(document.querySelectorAll('#dead-list article .meta time')).find((t) => t.textContent.startsWith('died '));
		return el && /^died (\d+(\.\d)? s ago|now)$/.test(el.textContent) && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/.test(el.title) && !document.querySelector('#dead-section').hidden;
	})()`)
	b.click("#dead-head")
	b.waitContains("#dead-head-view", "quarterly")
	b.click("#respawn")
	b.waitText(`[data-stat="dead_letters"]`, "0")
	b.waitText(`[data-stat="waiting"]`, "1")
	b.waitJS("an empty dead-letter list", `!document.querySelector('#dead-list article')`)
	if r := c.Expect(http.StatusOK, http.MethodGet, "/queues/reports/dead", nil); strings.TrimSpace(string(r.Body)) != `{"size":0}` {
		t.Fatalf("dead letters after the respawn: %s", r.Body)
	}
	c.MustPull("reports", msgWait, "quarterly")

	// Default properties: the list as stored, the tester on the edited list.
	b.open("#/defaults")
	b.waitJS("two entries", `document.querySelectorAll('#defaults .defaults-row').length === 2`)
	b.setValue("#test-name", "mail-7")
	b.click("#test")
	b.waitContains("#test-result", "Entry 2")
	b.waitContains("#test-result", `"ttl":3600`)
	b.screenshot("defaults")
	b.labelled("defaults")
	// Reordered and saved: the API returns the new order.
	b.click(`button[aria-label="Move entry 2 up"]`)
	b.click("#defaults-save")
	b.waitContains(`#main p.ok`, "Saved.")
	if r := c.Expect(http.StatusOK, http.MethodGet, "/props", nil); !strings.HasPrefix(string(r.Body), `[["^mail"`) {
		t.Fatalf("default list after the page saved it: %s", r.Body)
	}

	// Cluster: this gateway and the streams holding the queues.
	b.open("#/cluster")
	b.waitJS("streams", `document.querySelectorAll('#streams tbody tr').length >= 1 && document.querySelector('#streams tbody').textContent.includes('healthy')`)
	b.waitJS("the gateway's id", `document.querySelector('#gateway-info dd') && document.querySelector('#gateway-info dd').textContent.length > 0`)
	b.waitJS("no other gateway", `document.querySelector('#gateway-info').textContent.includes('Other gatewaysnone seen')`)
	b.screenshot("cluster")
	b.labelled("cluster")

	// Delete a queue from its page, after the confirmation.
	b.open("#/queue/mail-0")
	b.waitText(`[data-stat="waiting"]`, "1")
	b.click("#queue-delete")
	b.click(`[data-confirm="yes"]`)
	b.waitJS("the queue list", `location.hash === '#/queues'`)
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/mail-0", nil)

	// A phone-sized screen: the list still renders.
	b.run(chromedp.EmulateViewport(390, 844))
	b.open("#/queues")
	b.waitText(rowSel("jobs/resize", "waiting"), "4")
	b.screenshot("phone")

	// The dark theme follows the system's.
	b.run(chromedp.EmulateViewport(1280, 900))
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	b.open("#/queue/" + Q("jobs/resize"))
	b.waitText(`[data-stat="waiting"]`, "4")
	b.waitJS("the dark theme", `getComputedStyle(document.body).backgroundColor === 'rgb(13, 17, 23)'`)
	b.waitJS("four peeked messages", `document.querySelectorAll('#peek article').length === 4`)
	b.screenshot("queue-dark")
	b.noErrors()
}

// TestConsoleToken: with a bearer token the page opens without it (it holds
// no data), asks for it, and shows the queues once it was typed in; the
// console's API refuses requests without it.
func TestConsoleToken(t *testing.T) {
	t.Parallel()
	g := newOpsGateway(t) // Start's readiness probe has no credential
	g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"), "--auth-token", "s3cret", "--log-level", "warn")
	c := g.Client(t)
	c.Expect(http.StatusOK, http.MethodGet, "/ui/", nil)
	c.Expect(http.StatusOK, http.MethodGet, "/ui", nil) // redirected to /ui/
	c.Expect(http.StatusUnauthorized, http.MethodGet, "/ui/api/queues", nil)
	c.Push("billing", []byte("x"), "", "Authorization", "Bearer s3cret")

	b := newBrowser(t, g.HTTP)
	b.allow("status of 401") // the first look, before the token is known
	b.open("#/queues")
	b.waitJS("the sign-in form", `!document.querySelector('#login').hidden`)
	b.setValue("#login-token", "s3cret")
	b.click(`#login-form button[type="submit"]`)
	b.waitText(rowSel("billing", "waiting"), "1")
	b.noErrors()
}

// TestConsoleOff: --ui=false serves no console.
func TestConsoleOff(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t, "--ui=false")
	c.Expect(http.StatusNotFound, http.MethodGet, "/ui/", nil)
	c.Expect(http.StatusNotFound, http.MethodGet, "/ui/api/queues", nil)
}

// TestConsoleAPI checks the console API's answers to bad input: 400 with
// the reason, and the paging bounds.
func TestConsoleAPI(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	for i := range 12 {
		c.Push(fmt.Sprintf("q%02d", i), []byte(strconv.Itoa(i)), "")
	}
	for _, bad := range []string{"re=(", "sort=oldest_age", "sort=nope", "desc=2", "offset=-1", "limit=0", "limit=501", "limit=x"} {
		r := c.Do(http.MethodGet, "/ui/api/queues?"+bad, nil)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"error"`) {
			t.Errorf("%s: got %v, want 400 with an error", bad, r)
		}
	}
	var page struct {
		Total, Matched, Offset, Limit int
		Rows                          []struct {
			Name    string
			Waiting int
		}
	}
	r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues?sort=name&desc=1&offset=10&limit=5", nil)
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	if page.Total != 12 || page.Matched != 12 || len(page.Rows) != 2 || page.Rows[0].Name != "q01" || page.Rows[1].Name != "q00" || page.Rows[0].Waiting != 1 {
		t.Fatalf("page: %s", r.Body)
	}
	r = c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues?re=q0[2-4]", nil)
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	if page.Total != 12 || page.Matched != 3 || len(page.Rows) != 3 || page.Rows[0].Name != "q02" {
		t.Fatalf("filtered: %s", r.Body)
	}
	for _, bad := range []string{"/ui/api/queue?name=", "/ui/api/peek?name=q00&n=51", "/ui/api/peek?name=q00&n=0", "/ui/api/match?name="} {
		if r := c.Do(http.MethodGet, bad, nil); r.Status != http.StatusBadRequest {
			t.Errorf("%s: got %v, want 400", bad, r)
		}
	}
	c.Expect(http.StatusNotFound, http.MethodGet, "/ui/api/queue?name=nosuch", nil)
	r = c.Do(http.MethodPost, "/ui/api/match", []byte(`{"name":"a","list":[["(",{}]]}`), "Content-Type", "application/json")
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "invalid regexp") {
		t.Errorf("match with an invalid list: %v", r)
	}
	// Peek shows without taking.
	r = c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?name=q03", nil)
	if !strings.Contains(string(r.Body), `"body":"Mw=="`) {
		t.Fatalf("peek: %s", r.Body)
	}
	c.MustPull("q03", msgWait, "3")
	// The page: gzipped when asked, revalidated by its ETag.
	r = c.Expect(http.StatusOK, http.MethodGet, "/ui/app.js", nil, "Accept-Encoding", "gzip")
	if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("ETag") == "" {
		t.Fatalf("app.js: %v", r.Header)
	}
	c.Expect(http.StatusNotModified, http.MethodGet, "/ui/app.js", nil, "If-None-Match", r.Header.Get("ETag"))
	c.Expect(http.StatusNotFound, http.MethodGet, "/ui/nosuch.js", nil)
}

// TestConsoleManyQueues measures the queue list with many queues: it runs
// only with LMQ_CONSOLE_MEASURE=N (e.g. 10000), creates N queues, opens the
// console in Chromium and logs the time until the first rows showed, the
// bytes transferred, and the console API's answer times. It asserts only
// that the page shows the queues (no time bound).
func TestConsoleManyQueues(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LMQ_CONSOLE_MEASURE"))
	if n <= 0 {
		t.Skip("set LMQ_CONSOLE_MEASURE=N to measure the console with N queues")
	}
	g, c := StartClient(t, "--access-log=false")
	start := time.Now()
	var wg sync.WaitGroup
	jobs := make(chan int)
	errs := make(chan error, 1)
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				err := c.TryPush(ctx, fmt.Sprintf("tenant-%05d/jobs", i), []byte("x"))
				cancel()
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("created %d queues in %v", n, time.Since(start).Round(time.Millisecond))

	// The console API alone: the first answer collects the inventory, the
	// next ones are what a polling page costs.
	for i, q := range []string{"", "", "sort=waiting&desc=1", "re=^tenant-0999", "offset=9950"} {
		r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues?"+q, nil)
		t.Logf("GET /ui/api/queues?%s (%d): %v, %d bytes", q, i, r.Elapsed.Round(time.Millisecond), len(r.Body))
	}

	b := newBrowser(t, g.HTTP)
	b.open("#/queues")
	b.waitJS("the first rows", `document.querySelectorAll('#queues tbody tr[data-queue]').length === 50`)
	b.waitContains("#summary", fmt.Sprintf("of %s queues", groupThousands(n)))
	report, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`JSON.stringify({
		rendered: performance.getEntriesByName('lmq-queues-rendered')[0].startTime,
		nav: (e => ({ttfb: e.responseStart, dcl: e.domContentLoadedEventEnd, load: e.loadEventEnd, transfer: e.transferSize, body: e.encodedBodySize}))(performance.getEntriesByType('navigation')[0]),
		resources: performance.getEntriesByType('resource').map(e => ({name: e.name.replace(location.origin, ''), ms: Math.round(e.duration), transfer: e.transferSize, body: e.encodedBodySize, decoded: e.decodedBodySize})),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("page with %d queues: %s", n, report)
	b.noErrors()
}

// groupThousands formats n as the page does (en-US).
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// peekAnswer is GET /ui/api/peek's answer.
type peekAnswer struct {
	Messages []struct {
		Seq         uint64
		Priority    int
		ContentType string `json:"content_type"`
		Headers     map[string]string
		PushedAt    *time.Time `json:"pushed_at"`
		Retry       *int
		Delivered   int
		Size        int64
		Object      bool
		Body        []byte
		Truncated   bool
		Compound    bool
		PartCount   int `json:"part_count"`
		Parts       []struct {
			ContentType string `json:"content_type"`
			Body        []byte
		}
		PartsError string `json:"parts_error"`
	}
}

func peekQueue(t *testing.T, c *Client, queue string) peekAnswer {
	t.Helper()
	r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?n=50&name="+url.QueryEscape(queue), nil)
	var a peekAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("peek %q: %v: %s", queue, err, r.Body)
	}
	return a
}

// TestConsolePeek: the console's peek shows the next waiting messages
// without taking them: not those in flight, large bodies by their size
// only, compound messages as parts, and whatever a NATS program stored on a
// queue subject (garbage headers, a body that claims to be compound) without
// failing.
func TestConsolePeek(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t, "--max-payload", "1048576")

	// In flight: not shown; the rest in order, untouched.
	for i := range 3 {
		c.Push("peek/plain", []byte(fmt.Sprintf("m%d", i)), "text/plain")
	}
	d := c.MustPull("peek/plain", msgWait, "m0")
	a := peekQueue(t, c, "peek/plain")
	if len(a.Messages) != 2 || string(a.Messages[0].Body) != "m1" || string(a.Messages[1].Body) != "m2" ||
		a.Messages[0].ContentType != "text/plain" || a.Messages[0].PushedAt == nil || a.Messages[0].Retry == nil {
		t.Fatalf("peek with one in flight: %+v", a)
	}
	c.ExpectReply(http.StatusNoContent, "peek/plain", d.ID(), "ack")
	c.MustPull("peek/plain", msgWait, "m1")

	// A body in the Object Store: its size, not its bytes.
	big := make([]byte, 2<<20)
	c.Push("peek/big", big, "application/octet-stream")
	a = peekQueue(t, c, "peek/big")
	if len(a.Messages) != 1 || !a.Messages[0].Object || a.Messages[0].Size != int64(len(big)) || len(a.Messages[0].Body) != 0 {
		t.Fatalf("peek at a large body: %+v", a)
	}

	// A compound message: its parts.
	c.PatchProps("peek/acc", `{"accum":0.2}`)
	for i, ct := range []string{"text/plain", "application/json"} {
		r := c.Expect(http.StatusOK, http.MethodPost, "/messages/peek%2Facc", []byte(fmt.Sprintf(`{"part":%d}`, i)), "Content-Type", ct)
		if !strings.Contains(string(r.Body), "accum") {
			t.Fatalf("push to an accumulating queue: %v", r)
		}
	}
	testwait.WithinDetail(t, 30*time.Second, "the window to close", func() (bool, string) {
		a = peekQueue(t, c, "peek/acc")
		return len(a.Messages) == 1, fmt.Sprintf("%+v", a)
	})
	m := a.Messages[0]
	if !m.Compound || m.PartCount != 2 || len(m.Parts) != 2 || m.Parts[0].ContentType != "text/plain" ||
		string(m.Parts[1].Body) != `{"part":1}` || m.PartsError != "" {
		t.Fatalf("peek at a compound message: %+v", m)
	}

	// Garbage stored by a NATS program: shown as far as it makes sense.
	c.PatchProps("peek/junk", `{"retry":1}`)
	_, js := natsClient(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	junk := nats.NewMsg(mapping.QueueSubject("peek/junk"))
	junk.Header.Set(mapping.HdrPushedAt, "yesterday")
	junk.Header.Set(mapping.HdrRetry, "-5")
	junk.Header.Set(mapping.HdrDelivered, "99999999999")
	junk.Header.Set(mapping.HdrKind, mapping.KindCompound)
	junk.Header.Set(mapping.HdrKeepPrefix+"X-Bin", "\xff\xfe")
	junk.Data = []byte("\xc1 not msgpack")
	lost := nats.NewMsg(mapping.QueueSubject("peek/junk"))
	lost.Header.Set(mapping.HdrObject, "no-such-object")
	for _, msg := range []*nats.Msg{junk, lost} {
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	a = peekQueue(t, c, "peek/junk")
	if len(a.Messages) != 2 {
		t.Fatalf("peek at garbage: %+v", a)
	}
	if m := a.Messages[0]; m.PushedAt != nil || m.Retry != nil || m.Delivered != 0 || m.PartsError == "" ||
		string(m.Body) != "\xc1 not msgpack" || m.Headers["x-bin"] != "\ufffd" {
		t.Errorf("peek at garbage headers: %+v", m)
	}
	if m := a.Messages[1]; !m.Object || m.Size != -1 {
		t.Errorf("peek at a missing object: %+v", m)
	}
	// Dead letters: shown with when they died, not removed.
	c.PatchProps("peek/dead", `{"dead_letter":true,"retry":0}`)
	c.Push("peek/dead", []byte("gone"), "text/plain")
	d = c.MustPull("peek/dead", msgWait, "gone")
	c.ExpectReply(http.StatusNoContent, "peek/dead", d.ID(), "nack")
	var dead struct {
		Messages []struct {
			DiedAt    *time.Time `json:"died_at"`
			Delivered int
			Body      []byte
		}
	}
	testwait.WithinDetail(t, 30*time.Second, "the dead letter", func() (bool, string) {
		r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?dead=1&name=peek%2Fdead", nil)
		if err := json.Unmarshal(r.Body, &dead); err != nil {
			t.Fatal(err)
		}
		return len(dead.Messages) == 1, string(r.Body)
	})
	if m := dead.Messages[0]; m.DiedAt == nil || m.Delivered != 1 || string(m.Body) != "gone" {
		t.Fatalf("peek at a dead letter: %+v", m)
	}
	if a := peekQueue(t, c, "peek/dead"); len(a.Messages) != 0 {
		t.Fatalf("a dead letter among the waiting messages: %+v", a)
	}
	c.Expect(http.StatusOK, http.MethodGet, "/queues/peek%2Fdead/dead/head", nil)
	c.Expect(http.StatusBadRequest, http.MethodGet, "/ui/api/peek?dead=2&name=peek%2Fdead", nil)

	// Unknown queue, and the queue page's detail still answers.
	c.Expect(http.StatusNotFound, http.MethodGet, "/ui/api/peek?name=peek%2Fnosuch", nil)
	c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queue?name=peek%2Fjunk", nil)
}

// TestConsolePeekPriority (issue 25, finding 6a): the preview lists the
// waiting messages in the order they will be delivered, highest priority
// first and each priority in queue order, and says each one's priority (the
// preview of a queue holding priorities 0, 3 and 9 showed only the 0).
func TestConsolePeekPriority(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	const q = "emails"
	push := func(body string, p int) {
		t.Helper()
		c.Expect(http.StatusOK, http.MethodPost, fmt.Sprintf("/messages/%s?priority=%d", q, p), []byte(body), "Content-Type", "text/plain")
	}
	push("p0", 0)
	time.Sleep(time.Second) // so that p0 is the oldest by far (the list's oldest age)
	push("p3", 3)
	push("p9", 9)
	push("p3-second", 3)
	order := func(a peekAnswer) string {
		var s []string
		for _, m := range a.Messages {
			s = append(s, fmt.Sprintf("%s@%d", m.Body, m.Priority))
		}
		return strings.Join(s, " ")
	}
	if got, want := order(peekQueue(t, c, q)), "p9@9 p3@3 p3-second@3 p0@0"; got != want {
		t.Fatalf("preview %q, want %q", got, want)
	}
	// The delivery order is the preview's: the first pull takes its head,
	// which leaves the preview (in flight), the rest keep their order.
	d := c.MustPull(q, msgWait, "p9")
	if got, want := order(peekQueue(t, c, q)), "p3@3 p3-second@3 p0@0"; got != want {
		t.Fatalf("preview with p9 in flight %q, want %q", got, want)
	}
	c.ExpectReply(http.StatusNoContent, q, d.ID(), "ack")
	d = c.MustPull(q, msgWait, "p3")
	c.ExpectReply(http.StatusNoContent, q, d.ID(), "nack") // back to the tail of its priority
	testwait.WithinDetail(t, 30*time.Second, "the released p3 behind p3-second", func() (bool, string) {
		got := order(peekQueue(t, c, q))
		return got == "p3-second@3 p3@3 p0@0", got
	})
	// n bounds the preview across priorities.
	r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?n=2&name="+q, nil)
	var two peekAnswer
	if err := json.Unmarshal(r.Body, &two); err != nil || order(two) != "p3-second@3 p3@3" {
		t.Fatalf("preview of 2: %v %s", err, r.Body)
	}
	// The list's oldest age is the oldest waiting message's (p0, pushed
	// first), not the next one's.
	var list struct {
		Rows []struct {
			Name      string
			OldestAge *float64 `json:"oldest_age"`
		}
	}
	listed := time.Now()
	r = c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues", nil)
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Rows) != 1 || list.Rows[0].OldestAge == nil {
		t.Fatalf("queue list: %v %s", err, r.Body)
	}
	a := peekQueue(t, c, q)
	p0 := a.Messages[len(a.Messages)-1]
	if p0.PushedAt == nil || *list.Rows[0].OldestAge < listed.Sub(*p0.PushedAt).Seconds()-0.01 {
		t.Errorf("oldest age %v s, want at least p0's %v (pushed a second before the others)", *list.Rows[0].OldestAge, listed.Sub(*p0.PushedAt))
	}
	// A dead letter keeps its priority.
	c.PatchProps("emails-dead", `{"dead_letter":true,"retry":0}`)
	c.Expect(http.StatusOK, http.MethodPost, "/messages/emails-dead?priority=7", []byte("gone"), "Content-Type", "text/plain")
	d = c.MustPull("emails-dead", msgWait, "gone")
	c.ExpectReply(http.StatusNoContent, "emails-dead", d.ID(), "nack")
	testwait.WithinDetail(t, 30*time.Second, "the dead letter with its priority", func() (bool, string) {
		r := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?dead=1&name=emails-dead", nil)
		var dead peekAnswer
		if err := json.Unmarshal(r.Body, &dead); err != nil {
			t.Fatal(err)
		}
		return len(dead.Messages) == 1 && dead.Messages[0].Priority == 7, string(r.Body)
	})

	// The page shows the same order and each priority.
	if chromiumPath() == "" {
		t.Log("no Chromium: the page's part is not run")
		return
	}
	b := newBrowser(t, g.HTTP)
	b.open("#/queue/" + q)
	b.waitJS("three peeked messages", `document.querySelectorAll('#peek article').length === 3`)
	b.waitJS("the priorities in delivery order", `Array.from(document.querySelectorAll('#peek article .priority')).map(e => e.textContent).join() === 'priority 3,priority 3,priority 0'`)
	b.noErrors()
}

// TestConsoleScopedTokens: with --tokens, the console's API lists every
// queue, so it needs a token with the admin right on every queue; a token
// scoped to some queues is refused (403), while the page's files need none.
func TestConsoleScopedTokens(t *testing.T) {
	t.Parallel()
	g := tokensGateway(t, StartNATS(t))
	c := g.Client(t)
	scoped := tokensCreate(t, c, `{"name":"orders","prefix":"orders.","rights":["push","pull","admin"]}`)
	root := tokensCreate(t, c, `{"name":"root","rights":["admin"]}`)
	c.Expect(http.StatusOK, http.MethodGet, "/ui/", nil)
	c.Expect(http.StatusUnauthorized, http.MethodGet, "/ui/api/queues", nil)
	for _, path := range []string{"/ui/api/queues", "/ui/api/queue?name=orders.a", "/ui/api/peek?name=orders.a", "/ui/api/cluster", "/ui/api/match?name=orders.a"} {
		c.Expect(http.StatusForbidden, http.MethodGet, path, nil, bearer(scoped)...)
	}
	c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues", nil, bearer(root)...)
	c.Expect(http.StatusOK, http.MethodGet, "/ui/api/queues", nil, bearer(tokensOperator)...)
}

// The queue page's deliveries in flight, with a Nack that puts the message
// back, and the queue list's box that finds a delivery by its id.
func TestConsoleInFlight(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	// The browser comes up first, and the delivery under test is held for
	// ten minutes (beyond the tab's browserTimeout), not the default 30 s:
	// on a loaded machine Chromium alone may take longer than that to
	// start, and the delivery must still be in flight when the page looks.
	b := newBrowser(t, g.HTTP)
	c.PatchProps("inflight/q", `{"timeout":600}`)
	c.Push("inflight/q", []byte("held"), "text/plain")
	d := c.MustPull("inflight/q", msgWait, "held")
	b.open("#/queues")
	b.setValue("#find-delivery", d.ID())
	b.click(`#find-delivery-form button[type="submit"]`)
	b.waitContains("#found-delivery", "inflight/q")
	b.open("#/queue/" + Q("inflight/q"))
	b.waitContains("#inflight", d.ID())
	// Not paused: no badge says so.
	b.waitJS("the paused badge hidden", `getComputedStyle(document.getElementById('paused-badge')).display === 'none'`)
	b.screenshot("inflight")
	b.click(`button[data-nack="` + d.ID() + `"]`)
	b.waitContains("#inflight-result", "Nacked")
	c.ExpectReply(http.StatusNotFound, "inflight/q", d.ID(), "ack")
	c.MustPull("inflight/q", msgWait, "held")
	b.noErrors()
}

// TestConsoleMoveMessage: a previewed message's Move… button asks for the
// target queue and moves the message there.
func TestConsoleMoveMessage(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	c.Push("move/src", []byte("stays"), "text/plain")
	c.Push("move/src", []byte("moves"), "text/plain")
	b := newBrowser(t, g.HTTP)
	b.open("#/queue/" + Q("move/src"))
	b.waitJS("two peeked messages", `document.querySelectorAll('#peek article').length === 2`)
	b.click(`#peek article:nth-of-type(2) button[data-move]`)
	b.setValue(`#peek input[data-move-target]`, "move/dst")
	b.labelled("move")
	b.click(`#peek button[data-move-confirm]`)
	b.waitContains("#status", "Moved message")
	b.waitJS("one peeked message", `document.querySelectorAll('#peek article').length === 1`)
	c.MustPull("move/dst", msgWait, "moves")
	c.MustPull("move/src", msgWait, "stays")
	b.noErrors()
}
