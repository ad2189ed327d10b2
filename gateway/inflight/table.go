// Package inflight holds a gateway's deliveries in flight: the delivery
// table (id → the pulled message, its client, deadline and timer) and each
// entry's states (active, being acked, finished), the listing of the
// deliveries for an operator across the gateways (lmq.gw.<id>.deliveries),
// the relay of a reply to the gateway holding its delivery
// (lmq.gw.<id>.reply), and the deliveries bound to one client connection
// (Bound).
//
// It is apart from package gateway because it is bookkeeping of its own
// with narrow inputs: a pulled message (dispatch.Raw), the bus for the
// questions between gateways, and, from the core, what to do with an entry
// (release it, apply a reply). What a delivery does to the message (acks,
// releases, dead letters) stays with the core. It imports neither package
// gateway nor nats.go.
package inflight

import (
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
)

type state int

const (
	active state = iota
	busy         // an ack is on its way to JetStream
	finished
)

// Entry is one delivery of the table: the message handed out, to whom and
// when, and until when it is in flight. Its state changes only through its
// methods, under its lock.
type Entry struct {
	// ID is the delivery id (NewID).
	ID string
	// Raw is the message pulled from JetStream.
	Raw *dispatch.Raw
	// Client is who it was handed to, and At when.
	Client waits.Client
	At     time.Time

	mu       sync.Mutex
	state    state
	deadline time.Time
	timer    *time.Timer
}

// NewEntry is an active delivery of r, in flight until deadline.
func NewEntry(id string, r *dispatch.Raw, client waits.Client, at, deadline time.Time) *Entry {
	return &Entry{ID: id, Raw: r, Client: client, At: at, deadline: deadline}
}

// Queue is the name of the delivery's queue.
func (e *Entry) Queue() string { return e.Raw.Queue().Name() }

// Arm starts the delivery's timer: f runs when timeout passes.
func (e *Entry) Arm(timeout time.Duration, f func()) {
	e.mu.Lock()
	e.timer = time.AfterFunc(timeout, f)
	e.mu.Unlock()
}

// Finish moves an active delivery to finished and stops its timer; false
// if it was not active (already answered, expired or being acked).
func (e *Entry) Finish() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != active {
		return false
	}
	e.state = finished
	if e.timer != nil {
		e.timer.Stop()
	}
	return true
}

// Finished reports whether the delivery is no longer in flight.
func (e *Entry) Finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state == finished
}

// Expired reports whether the delivery's deadline has passed at now.
func (e *Entry) Expired(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !now.Before(e.deadline)
}

// BeginAck moves an active delivery whose deadline has not passed to busy
// (an ack on its way); false otherwise.
func (e *Entry) BeginAck(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != active || !now.Before(e.deadline) {
		return false
	}
	e.state = busy
	return true
}

// AbortAck makes a busy delivery active again (its ack failed); expired
// says whether its deadline passed meanwhile (at now).
func (e *Entry) AbortAck(now time.Time) (expired bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state = active
	return !now.Before(e.deadline)
}

// EndAck finishes a busy delivery whose ack took effect.
func (e *Entry) EndAck() {
	e.mu.Lock()
	e.state = finished
	e.timer.Stop()
	e.mu.Unlock()
}

// Extend moves the deadline of an active delivery not yet expired to now
// plus left and restarts its timer; false otherwise.
func (e *Entry) Extend(now time.Time, left time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != active || !now.Before(e.deadline) {
		return false
	}
	e.deadline = now.Add(left)
	e.timer.Reset(left)
	return true
}

// stop ends the delivery where it stands (its queue was deleted).
func (e *Entry) stop(finish bool) {
	e.mu.Lock()
	if finish {
		e.state = finished
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Unlock()
}

// Table maps delivery ids to this gateway's deliveries in flight.
type Table struct {
	mu sync.Mutex
	m  map[string]*Entry
}

// NewTable is an empty table.
func NewTable() *Table { return &Table{m: make(map[string]*Entry)} }

// Add puts e in the table.
func (t *Table) Add(e *Entry) {
	t.mu.Lock()
	t.m[e.ID] = e
	t.mu.Unlock()
}

// Get is the entry of id, nil when none.
func (t *Table) Get(id string) *Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// Del removes the entry of id.
func (t *Table) Del(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// Len is the number of entries.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// All is every entry, in no order.
func (t *Table) All() []*Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Entry, 0, len(t.m))
	for _, e := range t.m {
		out = append(out, e)
	}
	return out
}

// ByQueue is the number of entries per queue (queues with none are absent).
func (t *Table) ByQueue() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int)
	for _, e := range t.m {
		out[e.Queue()]++
	}
	return out
}

// DropQueue forgets the deliveries of a deleted queue.
func (t *Table) DropQueue(queue string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, e := range t.m {
		if e.Queue() == queue {
			e.stop(true)
			delete(t.m, id)
		}
	}
}

// StopTimers stops every entry's timer (the gateway is closing: its
// deliveries stay pending in JetStream).
func (t *Table) StopTimers() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.m {
		e.stop(false)
	}
}

// NewID makes a delivery id: a random (version 4) UUID whose first four
// bytes are the gateway's id prefix, so any gateway can tell where to relay
// a reply.
func NewID(prefix []byte) string {
	u := uuid.New()
	copy(u[:4], prefix)
	return u.String()
}

// Owner parses a delivery id: the canonical id (as the table's keys) and
// the id of the gateway holding it; ok is false for no delivery id.
func Owner(id string) (canonical, owner string, ok bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", "", false
	}
	return u.String(), fmt.Sprintf("%x", u[:4]), true
}
