package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// recorder is a Service that notes its starts and stops in a shared log and
// fails its start when told to.
type recorder struct {
	name string
	fail error
	log  *[]string
}

func (r *recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.fail
}

func (r *recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

// TestGroup: a Group starts its services in order; a start that fails stops
// the ones started before it, in reverse, and never starts the later ones;
// Stop stops the started ones in reverse, once.
func TestGroup(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		fail    string // the service whose start fails ("": none)
		stop    bool   // Stop the group after Start (twice)
		want    string
		wantErr error
	}{
		{name: "all start, then stop in reverse", stop: true,
			want: "start a, start b, start c, stop c, stop b, stop a"},
		{name: "all start, not stopped",
			want: "start a, start b, start c"},
		{name: "first fails: nothing to undo", fail: "a", stop: true,
			want: "start a", wantErr: boom},
		{name: "middle fails: earlier ones stopped in reverse, later never started", fail: "b", stop: true,
			want: "start a, start b, stop a", wantErr: boom},
		{name: "last fails", fail: "c",
			want: "start a, start b, start c, stop b, stop a", wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			var services []Service
			for _, n := range []string{"a", "b", "c"} {
				r := &recorder{name: n, log: &log}
				if n == tc.fail {
					r.fail = boom
				}
				services = append(services, r)
			}
			g := NewGroup(services...)
			if err := g.Start(context.Background()); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Start: %v, want %v", err, tc.wantErr)
			}
			if tc.stop {
				g.Stop()
				g.Stop()
			}
			if got := strings.Join(log, ", "); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			// A group starts once.
			before := slices.Clone(log)
			if err := g.Start(context.Background()); err != nil || !slices.Equal(log, before) {
				t.Fatalf("a second Start did something: %v, %v", err, log)
			}
		})
	}
}

// TestFunc: a Func service runs its functions; nil ones do nothing.
func TestFunc(t *testing.T) {
	var log []string
	g := NewGroup(
		Func(func(context.Context) error { log = append(log, "start"); return nil }, func() { log = append(log, "stop") }),
		Func(nil, nil),
	)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	if got := strings.Join(log, ", "); got != "start, stop" {
		t.Fatalf("got %s", got)
	}
}

// TestStopBeforeStart: a group stopped before it started never starts.
func TestStopBeforeStart(t *testing.T) {
	var log []string
	g := NewGroup(&recorder{name: "a", log: &log})
	g.Stop()
	if err := g.Start(context.Background()); err != nil || len(log) != 0 {
		t.Fatalf("started after Stop: %v, %v", err, log)
	}
}

// TestLoop: a Loop runs until Stop, which returns once the loop returned.
func TestLoop(t *testing.T) {
	running := make(chan struct{})
	returned := false
	l := NewLoop(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		returned = true
	})
	NewLoop(func(context.Context) {}).Stop() // never started: nothing to do
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-running
	l.Stop()
	if !returned {
		t.Fatal("Stop returned before the loop")
	}
}
