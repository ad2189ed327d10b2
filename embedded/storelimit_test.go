package embedded

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/logbuf"
	"github.com/nats-io/nats.go/jetstream"
)

const mib = 1 << 20

func TestPlanStore(t *testing.T) {
	for _, c := range []struct {
		name           string
		explicit, held int64
		space          fsSpace
		known          bool
		want           int64
		warn           string // in a warning; "" for none
	}{
		{name: "empty dedicated disk", held: 0, space: fsSpace{64 * mib, 64 * mib}, known: true, want: 48 * mib},
		// The case: the store filled its 48 MiB (its files a little
		// more); 75% of the free space now would be 12 MiB.
		{name: "full store restarted", held: 48*mib + 200<<10, space: fsSpace{64 * mib, 16*mib - 200<<10}, known: true, want: 49*mib + 200<<10},
		{name: "half full dedicated disk", held: 20 * mib, space: fsSpace{64 * mib, 44 * mib}, known: true, want: 48 * mib},
		// A disk shared with other files: no more than what it can give.
		{name: "shared disk", held: 0, space: fsSpace{252 << 30, 79 << 30}, known: true, want: (79 << 30) / 4 * 3},
		{name: "shared disk, store growing", held: 10 << 30, space: fsSpace{252 << 30, 69 << 30}, known: true, want: 10<<30 + (69<<30)/4*3},
		{name: "disk full", held: 63 * mib, space: fsSpace{64 * mib, mib / 2}, known: true, want: 64 * mib, warn: "more than the file system can give"},
		{name: "explicit", explicit: 10 * mib, held: 2 * mib, space: fsSpace{64 * mib, 62 * mib}, known: true, want: 10 * mib},
		{name: "explicit below held", explicit: 10 * mib, held: 48 * mib, space: fsSpace{64 * mib, 16 * mib}, known: true, want: 49 * mib, warn: "below what the store already holds"},
		{name: "explicit beyond the disk", explicit: 1 << 40, held: 0, space: fsSpace{64 * mib, 64 * mib}, known: true, want: 1 << 40, warn: "more than the file system can give"},
		{name: "unmeasured default", held: 5 * mib, want: 0},
		{name: "unmeasured explicit", explicit: 100 * mib, held: 5 * mib, want: 100 * mib},
		{name: "unmeasured explicit below held", explicit: 1 * mib, held: 5 * mib, want: 6 * mib, warn: "below what the store already holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := planStore(c.explicit, c.held, c.space, c.known)
			if p.limit != c.want {
				t.Errorf("limit %d, want %d", p.limit, c.want)
			}
			if p.limit != 0 && p.limit < c.held+storeHeadroom {
				t.Errorf("limit %d below what the store holds (%d) plus headroom", p.limit, c.held)
			}
			warns := strings.Join(p.warn, "\n")
			if c.warn == "" && warns != "" {
				t.Errorf("unexpected warning: %s", warns)
			}
			if c.warn != "" && !strings.Contains(warns, c.warn) {
				t.Errorf("warnings %q, want one saying %q", warns, c.warn)
			}
		})
	}
}

// TestStoreLimitNotBelowHeld: a store filled to its limit and started
// again, with the same limit asked for, gets a limit above what it holds
// (with a warning), so that it takes writes at once: the ones a queue's
// deletion needs. Without the floor every write would be refused
// ("insufficient resources") until a restart with a larger limit.
func TestStoreLimitNotBelowHeld(t *testing.T) {
	dir := t.TempDir()
	const limit = 2 * mib
	s, err := startErr(Options{DataDir: dir, MaxStore: limit})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MaxStore(); got != limit {
		t.Errorf("MaxStore %d on an empty store, want the %d asked for", got, limit)
	}
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 64<<10)
	refused := false
	for range 2 * limit / len(body) {
		if _, err := js.Publish(ctx, "fill", body); err != nil {
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10023 {
				t.Fatalf("publish: %v, want insufficient resources", err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("%d bytes stored under a limit of %d", 2*limit, limit)
	}
	nc.Close()
	s.Stop()

	held := storeBytes(dir)
	if held <= limit {
		t.Fatalf("the store's files hold %d bytes, no more than the limit %d: nothing to test", held, limit)
	}
	var logs logbuf.Buffer
	s = start(t, Options{DataDir: dir, MaxStore: limit, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := s.MaxStore(); got < held+storeHeadroom {
		t.Errorf("MaxStore %d after a restart, below what the store holds (%d) plus %d", got, held, storeHeadroom)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "below what the store already holds") {
		t.Errorf("no warning that the limit asked for was raised:\n%s", out)
	}
	nc, err = s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "fill", []byte("a small write")); err != nil {
		t.Errorf("a small write after the restart: %v", err)
	}
}

// TestStoreLimitDefault: without MaxStore the limit is planStore's, from
// the file system's size and free space and the store's files, not left
// to nats-server (which would print and, until its streams are recovered,
// use 75% of the free space).
func TestStoreLimitDefault(t *testing.T) {
	dir := t.TempDir()
	space, err := diskSpace(dir)
	if err != nil {
		t.Skipf("file system not measured here: %v", err)
	}
	s := start(t, Options{DataDir: dir})
	got := s.MaxStore()
	if got <= 0 || got > space.total/4*3 {
		t.Errorf("MaxStore %d, want more than 0 and at most 75%% of the file system's %d", got, space.total)
	}
	if got < storeHeadroom {
		t.Errorf("MaxStore %d below the headroom", got)
	}
}
