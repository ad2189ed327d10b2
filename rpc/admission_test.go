package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// admissionState is an outbox's counts, and its server-wide total's.
type admissionState struct {
	limit    int // the connection's bound (0: none)
	pending  int
	admitted int // pulls admitted, each counted at est
	est      int
	listing  bool // a listing of the connection is being served
	reserved int  // what it set aside
	failed   bool // a write failed

	total         int // the server-wide bound (0: none)
	totalUsed     int
	totalReserved int
}

func (st admissionState) outbox() *outbox {
	o := newOutbox(nil, time.Second, func(error) {})
	o.bound(st.limit, newSharedBytes(st.total))
	o.pending, o.admitted, o.listing, o.reserved = st.pending, st.admitted, st.listing, st.reserved
	if st.est > 0 {
		o.est = st.est
	}
	if st.failed {
		o.err = errors.New("write failed")
	}
	if o.total != nil {
		o.total.used, o.total.reserved = st.totalUsed, st.totalReserved
	}
	return o
}

// TestOutboxAdmission: whether a pull is admitted (admit), a listing is
// taken by the reader (startListing) or may build its answer (reserve),
// and the reader reads a new request (awaitRoom, then the total's
// waitRoom), in the states that decide it. An operation that would wait
// is seen through a context already ended: it returns that context's error
// instead of waiting.
func TestOutboxAdmission(t *testing.T) {
	t.Parallel()
	const K, M = 1 << 10, 1 << 20
	type op int
	const (
		pull op = iota
		startListing
		reserve
		read
	)
	cases := []struct {
		name string
		st   admissionState
		op   op
		n    int // reserve's size
		want bool
	}{
		// Pulls: per connection, their answers at est beside the pending ones.
		{"pull, no bound", admissionState{pending: 100 * M}, pull, 0, true},
		{"first pull, pending below the bound", admissionState{limit: 4 * M, pending: 4*M - 1, est: 8 * M}, pull, 0, true},
		{"first pull, pending at the bound", admissionState{limit: 4 * M, pending: 4 * M}, pull, 0, false},
		{"16th pull fits", admissionState{limit: 4 * M, admitted: 15, est: 256 * K}, pull, 0, true},
		{"17th pull does not", admissionState{limit: 4 * M, admitted: 16, est: 256 * K}, pull, 0, false},
		{"pull beside a listing being built", admissionState{limit: 4 * M, admitted: 1, est: 256 * K, listing: true, reserved: 4*M - 256*K}, pull, 0, false},
		{"pull after a write failed", admissionState{limit: 4 * M, pending: 8 * M, failed: true}, pull, 0, true},
		// Pulls and the total: none taken at its bound, nothing set aside.
		{"pull, total has room", admissionState{limit: 4 * M, total: 8 * M, totalUsed: 8*M - 1}, pull, 0, true},
		{"pull, total at its bound", admissionState{limit: 4 * M, total: 8 * M, totalUsed: 8 * M}, pull, 0, false},
		{"pull, total full of listings being built", admissionState{limit: 4 * M, total: 8 * M, totalUsed: 4 * M, totalReserved: 4 * M}, pull, 0, false},
		{"pull, total at its bound, no bound per connection", admissionState{total: 8 * M, totalUsed: 8 * M}, pull, 0, false},
		// Listings: one at a time per connection.
		{"listing, none being served", admissionState{limit: 4 * M}, startListing, 0, true},
		{"listing, one being served", admissionState{limit: 4 * M, listing: true}, startListing, 0, false},
		{"listing, one being served, no bound", admissionState{listing: true}, startListing, 0, false},
		// Listings' answers: set aside in the total before they are built.
		{"reserve, no total", admissionState{limit: 4 * M, listing: true}, reserve, 256 * K, true},
		{"reserve, fits", admissionState{total: 8 * M, totalUsed: 7 * M, totalReserved: 768 * K, listing: true}, reserve, 256 * K, true},
		{"reserve, does not fit beside another", admissionState{total: 8 * M, totalUsed: 7 * M, totalReserved: 768*K + 1, listing: true}, reserve, 256 * K, false},
		{"reserve, larger than the room, alone", admissionState{total: 8 * M, totalUsed: 8*M - 1, listing: true}, reserve, 4 * M, true},
		{"reserve, total at its bound", admissionState{total: 8 * M, totalUsed: 8 * M, listing: true}, reserve, 1, false},
		// Reading a request: below both bounds, what is set aside counting.
		{"read, below the bounds", admissionState{limit: 4 * M, pending: 4*M - 1, total: 8 * M, totalUsed: 4 * M, totalReserved: 4*M - 1}, read, 0, true},
		{"read, connection at its bound", admissionState{limit: 4 * M, pending: 4 * M}, read, 0, false},
		{"read, connection at its bound, write failed", admissionState{limit: 4 * M, pending: 4 * M, failed: true}, read, 0, true},
		{"read, total at its bound with answers set aside", admissionState{limit: 4 * M, total: 8 * M, totalUsed: 4 * M, totalReserved: 4 * M}, read, 0, false},
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.st.outbox()
			var err error
			switch tc.op {
			case pull:
				err = o.admit(ended)
				if err == nil && o.admitted != tc.st.admitted+1 {
					t.Errorf("admitted %d after admit, want %d", o.admitted, tc.st.admitted+1)
				}
			case startListing:
				err = o.startListing(ended)
				if err == nil && !o.listing {
					t.Error("listing not marked as being served")
				}
			case reserve:
				used, reserved := o.total.held()
				err = o.reserve(ended, tc.n)
				if used2, reserved2 := o.total.held(); err == nil && o.total != nil && (used2 != used || reserved2 != reserved+tc.n) {
					t.Errorf("total %d held, %d set aside after reserve; want %d, %d", used2, reserved2, used, reserved+tc.n)
				}
				if err == nil && o.reserved != tc.st.reserved+tc.n {
					t.Errorf("connection's reserved %d, want %d", o.reserved, tc.st.reserved+tc.n)
				}
			case read:
				if err = o.awaitRoom(ended, 0); err == nil {
					err = o.total.waitRoom(ended)
				}
			}
			if got := err == nil; got != tc.want {
				t.Fatalf("proceeds: %v (err %v), want %v", got, err, tc.want)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want the context's", err)
			}
		})
	}
}

// TestOutboxAdmissionWakes: what waits for admission proceeds once what held
// it back is handed over or written: a pull once the listing set aside is
// answered, a listing once the previous one is, a reservation once another
// connection's answers are written, and a reservation at once after a
// failed write (errAnswerDropped: nothing to build).
func TestOutboxAdmissionWakes(t *testing.T) {
	t.Parallel()
	const M = 1 << 20
	total := newSharedBytes(4 * M)
	a := newOutbox(nil, time.Second, func(error) {})
	a.bound(4*M, total)
	b := newOutbox(nil, time.Second, func(error) {})
	b.bound(4*M, total)
	ctx := t.Context()

	// a: a listing set aside 3 MiB; a second is not taken, nor a pull
	// beside an admitted one.
	if err := a.startListing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.reserve(ctx, 3*M); err != nil {
		t.Fatal(err)
	}
	if err := a.admit(ctx); err != nil {
		t.Fatal(err) // the first pull: pending below the bound
	}
	a.mu.Lock()
	a.est = 1 * M
	a.mu.Unlock()
	second := make(chan error, 1)
	go func() { second <- a.startListing(ctx) }()
	pulled := make(chan error, 1)
	go func() { pulled <- a.admit(ctx) }()
	// b: its listing does not fit beside a's.
	if err := b.startListing(ctx); err != nil {
		t.Fatal(err)
	}
	reserved := make(chan error, 1)
	go func() { reserved <- b.reserve(ctx, 2*M) }()

	// (That they wait rather than proceed is TestOutboxAdmission's; here,
	// that they are woken.)
	select {
	case err := <-second:
		t.Fatalf("a second listing taken while one is served: %v", err)
	case err := <-pulled:
		t.Fatalf("a pull admitted beside 3 MiB set aside: %v", err)
	case err := <-reserved:
		t.Fatalf("b reserved 2 MiB beside 3 of 4 MiB set aside: %v", err)
	default:
	}

	// a's listing answers (1 KiB, written nowhere: pending), which frees
	// the total's room and a's listing slot.
	a.mu.Lock()
	a.pending += 1 << 10
	a.endListingLocked(1 << 10)
	a.mu.Unlock()
	for name, ch := range map[string]chan error{"second listing": second, "pull": pulled, "b's reservation": reserved} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s still waits once the listing answered", name)
		}
	}
	if used, res := total.held(); used != 1<<10 || res != 2*M {
		t.Errorf("total %d held, %d set aside; want 1 KiB, 2 MiB", used, res)
	}

	// After a failed write a reservation proceeds without setting aside.
	b.mu.Lock()
	b.err = errors.New("broken pipe")
	b.endListingLocked(0)
	b.mu.Unlock()
	if err := b.reserve(ctx, 8*M); !errors.Is(err, errAnswerDropped) {
		t.Errorf("reserve after a failed write: %v, want errAnswerDropped", err)
	}
}

// bigDefaults is a default list whose get_default_props answer is about
// 100 KiB.
func bigDefaults(t *testing.T) mapping.DefaultList {
	t.Helper()
	entries := make([]any, 1000)
	for i := range entries {
		entries[i] = []any{fmt.Sprintf("^tenant-%04d/jobs/.*", i), map[string]any{
			"retry": int64(3), "timeout": int64(45), "dead_letter_queue": fmt.Sprintf("tenant-%04d/dead", i)}}
	}
	list, err := mapping.DefaultListFromSlice(entries)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestUnreadListingsBounded: clients that pipeline listings (100 to a
// write) and never read the answers, over real TCP. Their answers waiting
// to be written stay within the connection's bound (plus one answer, or
// the size one was counted at) and the server-wide one (plus one answer
// set aside alone); each connection has at most two requests taken from
// its socket (the listing being served, the next waiting for it); once the
// clients leave, nothing is counted any more and a new client is served.
func TestUnreadListingsBounded(t *testing.T) {
	t.Parallel()
	const K, M = 1 << 10, 1 << 20
	cases := []struct {
		name           string
		perConn, total int
		conns          int
		method         string
		params         []any
	}{
		{"default list, per connection", 512 * K, 1 << 30, 4, "get_default_props", nil},
		{"messages with bodies, per connection", 512 * K, 1 << 30, 4, "messages", []any{"big", 50, map[string]any{"body": true}}},
		{"messages without bodies, per connection", 64 * K, 1 << 30, 2, "messages", []any{"big", 50}},
		{"default list, server-wide", 4 * M, 1 * M, 6, "get_default_props", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			core := fakecore.New()
			if err := core.Queues().SetDefaultProps(t.Context(), bigDefaults(t)); err != nil {
				t.Fatal(err)
			}
			body := strings.Repeat("b", 4<<10)
			for range 50 {
				core.Put("big", gateway.Message{Body: []byte(body)})
			}
			addr, s := startServer(t, core, Options{MaxAnswerBytes: tc.perConn, MaxTotalAnswerBytes: tc.total, WriteTimeout: time.Minute})
			probe := dialRPC(t, addr)
			r := probe.call(tc.method, tc.params...)
			if r.err != nil {
				t.Fatalf("%s: %v", tc.method, r.err)
			}
			size := len(marshal(t, r.result))
			probe.conn.Close()
			testwait.For(t, "the probe's connection closed", func() bool { return connCount(s) == 0 })

			var batch []byte
			for i := range 100 {
				batch = append(batch, encodeRequest(t, uint32(i), tc.method, tc.params...)...)
			}
			var flooders []net.Conn
			var wg sync.WaitGroup
			for range tc.conns {
				nc := dialRaw(t, addr)
				flooders = append(flooders, nc)
				wg.Go(func() {
					// Until the server stops reading and the test closes
					// the connection (a bound on the test only).
					for range 1000 {
						if _, err := nc.Write(batch); err != nil {
							return
						}
					}
				})
			}
			// Stalled: the answers pile up to a bound, the readers wait.
			testwait.For(t, "the answers at their bounds", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				if len(s.conns) != tc.conns {
					return false
				}
				if used, _ := s.answers.held(); used >= tc.total {
					return true
				}
				for c := range s.conns {
					c.out.mu.Lock()
					full := c.out.fullLocked()
					c.out.mu.Unlock()
					if !full {
						return false
					}
				}
				return true
			})
			// What a listing is counted at before it is built: the size of
			// the recent answers, at first initialAnswerEstimate.
			answer := max(size, initialAnswerEstimate)
			s.mu.Lock()
			for c := range s.conns {
				c.out.mu.Lock()
				peak := c.out.peak
				c.out.mu.Unlock()
				if peak > tc.perConn+answer {
					t.Errorf("a connection's answers reached %d bytes, bound %d + %d", peak, tc.perConn, answer)
				}
				// Taken from the socket and not finished: the listing the
				// reader holds, the one being served, and those whose
				// answers are queued behind the write in progress (their
				// handlers wait for it: see sendAs).
				c.budget.mu.Lock()
				taken := s.opt.MaxInFlight - c.budget.slots
				c.budget.mu.Unlock()
				if most := 2 + (tc.perConn+answer)/size; taken > most {
					t.Errorf("%d requests of a connection taken from its socket, want at most %d", taken, most)
				}
			}
			s.mu.Unlock()
			if peak := s.answers.highest(); peak > tc.total+answer {
				t.Errorf("the answers across connections reached %d bytes, bound %d + %d", peak, tc.total, answer)
			}
			t.Logf("answers of %d bytes; peak %d bytes across %d connections", size, s.answers.highest(), tc.conns)

			for _, nc := range flooders {
				nc.Close()
			}
			wg.Wait()
			testwait.For(t, "the flooders' connections closed", func() bool { return connCount(s) == 0 })
			if used, reserved := s.answers.held(); used != 0 || reserved != 0 {
				t.Errorf("%d answer bytes still counted (%d set aside) after the clients left", used, reserved)
			}
			c := dialRPC(t, addr)
			if r := c.call(tc.method, tc.params...); r.err != nil || len(marshal(t, r.result)) != size {
				t.Errorf("%s after: %v, %d bytes (want %d)", tc.method, r.err, len(marshal(t, r.result)), size)
			}
			c.ok("ok", "push", "q", "after")
		})
	}
}

func connCount(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
