package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// diskFullPoll bounds each wait for the gateway to notice the full disk or
// its recovery (the embedded server's watchdog looks every 2 s).
const diskFullPoll = 90 * time.Second

// TestDiskFullRecovers (issue 15, item 11): on a small tmpfs, filling the
// data directory makes pushes fail with 503 and Retry-After and
// /readyz?verbose say the store is full, while /readyz stays 200 (issue 40,
// item 11: consumers must keep reaching the gateway); freeing space brings
// pushes back without a restart, and every message answered 200 is still
// there.
func TestDiskFullRecovers(t *testing.T) {
	t.Parallel()
	dir := smallTmpfs(t, "64m")
	_, c := StartClient(t, "--data-dir", dir)
	const q = "diskfull"

	answered := map[string]bool{} // bodies answered 200
	unknown := map[string]bool{}  // bodies whose push had no clear answer
	push := func(body string) *Response {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		r, err := c.Send(ctx, http.MethodPost, "/messages/"+q, []byte(body), "Content-Type", "text/plain")
		if err != nil {
			unknown[body] = true
			return &Response{}
		}
		switch r.Status {
		case http.StatusOK:
			answered[body] = true
		case http.StatusServiceUnavailable:
		default:
			unknown[body] = true // e.g. 504: may or may not be stored
		}
		return r
	}
	pad := string(make([]byte, 100<<10))
	body := func(i int) string { return fmt.Sprintf("m%05d:%s", i, pad) }

	if r := push(body(0)); r.Status != http.StatusOK {
		t.Fatalf("first push: %v", r)
	}
	// Fill the file system but for a little: JetStream's own limit (75% of
	// the free space at start) is not what runs out, the disk is.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for left := free - 2<<20; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			break // full already
		}
	}
	f.Close()

	i := 1
	for ; i < 200; i++ {
		if r := push(body(i)); r.Status != http.StatusOK {
			t.Logf("push %d on the full disk: %d %q", i, r.Status, r.Body)
			break
		}
	}
	if i == 200 {
		t.Fatal("200 pushes of 100 KiB fit on a full 64 MiB disk")
	}

	// Once the store failure is known, pushes fail at once with 503 and
	// Retry-After, and the gateway is not ready.
	testwait.Paced(t, 200*time.Millisecond, diskFullPoll, "a 503 with Retry-After on the full disk", func() (bool, string) {
		i++
		r := push(body(i))
		return r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") != "", r.String()
	})
	if r := c.Do(http.MethodGet, "/readyz?verbose", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "store: full: writes refused") {
		t.Errorf("/readyz?verbose on the full disk: %v, want 200 saying the store is full", r)
	}

	// Space comes back: pushes succeed again and the gateway is ready,
	// without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testwait.Paced(t, 200*time.Millisecond, diskFullPoll, "a push answered 200 after space was freed", func() (bool, string) {
		i++
		r := push(body(i))
		return r.Status == http.StatusOK, r.String()
	})
	testwait.Paced(t, 200*time.Millisecond, diskFullPoll, "/readyz?verbose saying the store is ok after space was freed", func() (bool, string) {
		r := c.Do(http.MethodGet, "/readyz?verbose", nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "store: ok"), r.String()
	})

	// Every message answered 200 is there; nothing else but pushes
	// without a clear answer.
	got := map[string]bool{}
	for {
		r := c.Pull(q, "0")
		if r.Status == http.StatusNoContent {
			break
		}
		if r.Status != http.StatusOK {
			t.Fatalf("pull: %v", r)
		}
		b := string(r.Body)
		if got[b] {
			t.Errorf("message %.6s delivered twice", b)
		}
		got[b] = true
		if !answered[b] && !unknown[b] {
			t.Errorf("message %.6s was answered 503 yet stored", b)
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	for b := range answered {
		if !got[b] {
			t.Errorf("message %.6s was answered 200 and is lost", b)
		}
	}
	t.Logf("%d pushes answered 200, %d without a clear answer, %d pulled", len(answered), len(unknown), len(got))
}

// smallTmpfs mounts a tmpfs of size (mount's -o size=) on a new directory
// for a test to fill, and unmounts it when the test ends; it skips the test
// where that cannot be done (not Linux, not root). Call it before starting
// the gateway: cleanups run last-in first-out, so the gateway is stopped
// before the file system goes.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs a tmpfs mount (Linux)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
