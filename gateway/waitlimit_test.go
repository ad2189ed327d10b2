package gateway_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestWaitingPullLimit: Config.MaxWaitingPulls bounds the pulls that may wait,
// Pull and PullAny together, whichever front end called them (the core does
// not know): beyond it a pull that would wait fails at once with ErrBusy,
// which is ErrUnavailable (HTTP 503, RPC "unavailable"); a pull with wait 0 is
// not counted; a slot freed is taken again.
func TestWaitingPullLimit(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, _, g := startCoreWith(t, gateway.Config{MaxWaitingPulls: 2})

	type result struct {
		d   *gateway.Delivery
		err error
	}
	// Two pulls wait, one on a queue and one on a pattern, until cancelled.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first, second := make(chan result, 1), make(chan result, 1)
	sig := gateway.Signals(g).Dispatch
	sig.WaiterParked.Init(t)
	sig.PullAnyParked.Init(t)
	go func() {
		d, err := g.Messages().Pull(wctx, "wl-a", -1)
		first <- result{d, err}
	}()
	go func() {
		d, err := g.Messages().PullAny(wctx, regexp.MustCompile(`^wl-b`), time.Hour, nil)
		second <- result{d, err}
	}()
	waitParked(sig, "wl-a")
	sig.PullAnyParked.WaitOrTimeout()
	if n := g.Inspect().WaitingPulls(); n != 2 {
		t.Fatalf("WaitingPulls %d with two pulls waiting, want 2", n)
	}
	// Both are listed for the console, with what they wait on.
	pulls, byKind := g.Inspect().WaitingClients()
	var waits []string
	for _, p := range pulls {
		waits = append(waits, p.Waits)
		if p.Client.Kind != gateway.ClientGo || p.Since.IsZero() {
			t.Errorf("waiting pull %+v: want kind go and a start", p)
		}
	}
	slices.Sort(waits)
	if !slices.Equal(waits, []string{"pull-any: ^wl-b", "wl-a"}) || byKind[gateway.ClientGo] != 2 {
		t.Errorf("WaitingClients: %v, %v", waits, byKind)
	}

	for name, pull := range map[string]func() (*gateway.Delivery, error){
		"pull": func() (*gateway.Delivery, error) { return g.Messages().Pull(ctx, "wl-c", time.Hour) },
		"pull-any": func() (*gateway.Delivery, error) {
			return g.Messages().PullAny(ctx, regexp.MustCompile(`^wl-c`), -1, nil)
		},
	} {
		d, err := pull()
		if !errors.Is(err, gateway.ErrBusy) || !errors.Is(err, gateway.ErrUnavailable) || d != nil {
			t.Errorf("%s beyond the limit: %v, %v; want ErrBusy (ErrUnavailable)", name, d, err)
		} else if !strings.Contains(err.Error(), "limit 2") {
			t.Errorf("%s beyond the limit: %q does not name the limit", name, err)
		}
	}
	// A pull that does not wait still gets its message at the limit.
	mustPush(t, g, "wl-c", "now")
	if d, err := g.Messages().Pull(ctx, "wl-c", 0); err != nil || d == nil || string(d.Message.Body) != "now" {
		t.Fatalf("pull with wait 0 at the limit: %v, %v", d, err)
	}
	if n := g.Inspect().WaitingPulls(); n != 2 {
		t.Errorf("WaitingPulls %d after the refused pulls, want 2", n)
	}

	// The waiting pulls still get their messages, and then free their slots.
	mustPush(t, g, "wl-a", "a")
	if r := <-first; r.err != nil || r.d == nil || string(r.d.Message.Body) != "a" {
		t.Fatalf("waiting pull: %v, %v", r.d, r.err)
	}
	// (Its slot was given back before its Pull returned.)
	if n := g.Inspect().WaitingPulls(); n != 1 {
		t.Fatalf("WaitingPulls %d once a pull got its message, want 1", n)
	}
	third := make(chan result, 1)
	go func() {
		d, err := g.Messages().Pull(wctx, "wl-c", time.Hour)
		third <- result{d, err}
	}()
	waitParked(sig, "wl-c")
	if n := g.Inspect().WaitingPulls(); n != 2 {
		t.Fatalf("WaitingPulls %d with a pull in the freed slot, want 2", n)
	}
	mustPush(t, g, "wl-c", "c")
	if r := <-third; r.err != nil || r.d == nil || string(r.d.Message.Body) != "c" {
		t.Fatalf("pull in a freed slot: %v, %v", r.d, r.err)
	}
	cancel()
	if r := <-second; r.d != nil {
		t.Errorf("cancelled pull-any got %v", r.d)
	}
	if n := g.Inspect().WaitingPulls(); n != 0 {
		t.Fatalf("WaitingPulls %d once every pull returned, want 0", n)
	}
}
