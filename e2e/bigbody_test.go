package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// procStatusKiB reads a field of /proc/PID/status (VmRSS, VmHWM) in KiB.
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the gateway's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestBigBodyStreamed (issue 15, item 9): a push larger than a NATS message is
// streamed to the Object Store, not read into memory whole. Bodies beyond
// --max-body are answered 413 (a declared Content-Length at once, a chunked
// body once the limit is passed) while the gateway's peak memory grows by
// less than the bodies it was sent up to the limit (the old code held each
// whole), and a body just under the limit comes back byte-exact.
func TestBigBodyStreamed(t *testing.T) {
	heavy(t, "bodies of many MiB")
	if runtime.GOOS != "linux" {
		t.Skip("reads the gateway's memory from /proc")
	}
	const (
		maxBody = 32 << 20
		clients = 3
		// Bound on the growth of the gateway's peak RSS while three
		// concurrent chunked bodies are each read up to maxBody: a third of
		// the 96 MiB the three bodies take when held whole (the code before
		// streaming grew by about 230 MiB here).
		rssBound = 32 << 10 // KiB
	)
	// An external NATS server (in the test process, 1 MiB max_payload):
	// the gateway's RSS is then the gateway's alone, without the embedded
	// server's file store caches of what was written.
	gw := StartWithNATS(t, StartNATS(t), "--max-body", strconv.Itoa(maxBody))
	c := gw.Client(t)
	c.Push("big", []byte("warm-up"), "text/plain")
	c.MustPull("big", msgWait, "warm-up")

	base := procStatusKiB(t, gw.PID(), "VmHWM")

	// A declared length beyond the limit: 413 without the body being read.
	declared, err := http.NewRequest(http.MethodPost, gw.HTTP+"/messages/big",
		io.LimitReader(zeros{}, maxBody+1))
	if err != nil {
		t.Fatal(err)
	}
	declared.ContentLength = maxBody + 1
	if code := sendBig(gw, declared); code != http.StatusRequestEntityTooLarge {
		t.Errorf("declared %d bytes: %d, want 413", maxBody+1, code)
	}

	// Chunked bodies (no length) half again over the limit, at once.
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := range clients {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, gw.HTTP+"/messages/big",
				io.LimitReader(zeros{}, maxBody+maxBody/2))
			if err != nil {
				return
			}
			req.ContentLength = -1 // chunked
			codes[i] = sendBig(gw, req)
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked body %d beyond --max-body: %d, want 413", i, code)
		}
	}
	peak := procStatusKiB(t, gw.PID(), "VmHWM")
	t.Logf("gateway peak RSS %d KiB before, %d KiB after %d concurrent bodies of %d bytes (growth %d KiB, bound %d KiB)",
		base, peak, clients, maxBody+maxBody/2, peak-base, rssBound)
	if peak-base > rssBound {
		t.Errorf("peak RSS grew by %d KiB, more than %d KiB: bodies are held in memory", peak-base, rssBound)
	}
	// Nothing of the refused bodies was queued.
	c.PullEmpty("big", "0")

	// A body just under the limit is streamed and comes back byte-exact.
	body := make([]byte, maxBody-1)
	rng := rand.NewChaCha8([32]byte{'b', 'i', 'g'})
	_, _ = rng.Read(body)
	req, err := http.NewRequest(http.MethodPost, gw.HTTP+"/messages/big", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // streamed without a declared length, too
	req.Header.Set("Content-Type", "application/x-big")
	if code := sendBig(gw, req); code != http.StatusOK {
		t.Fatalf("push of %d bytes: %d, want 200", len(body), code)
	}
	r := c.Pull("big", msgWait)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, body) {
		t.Fatalf("pull: %d, %d bytes sha256 %x, want %d bytes sha256 %x",
			r.Status, len(r.Body), sha256.Sum256(r.Body), len(body), sha256.Sum256(body))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-big" {
		t.Errorf("content-type %q", ct)
	}
	c.ExpectReply(http.StatusNoContent, "big", r.ID(), "ack")
	c.PullEmpty("big", "0")
}

// sendBig sends req and answers its status, 0 on a transport error (logged).
func sendBig(gw *Gateway, req *http.Request) int {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := gw.hc.Do(req.WithContext(ctx))
	if err != nil {
		gw.t.Logf("%s %s: %v", req.Method, req.URL, err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// zeros is an endless body that takes no memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
