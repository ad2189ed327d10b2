// Package fakecore is an in-memory queue core for the front ends' tests
// (httpapi, rpc, sqs), handed out as handles the way the core is
// (gateway.Gateway's Messages, Queues, Inspect): each handle has the
// methods of the real one that a front end's Core interface asks for, so a
// test fills a front end's Core with them,
//
//	f := fakecore.New()
//	httpapi.Core{Messages: f.Messages(), Queues: f.Queues(), Inspect: f.Inspect()}
//
// and a front end's handling of requests and answers can be tested
// without NATS. Core itself is the tests' hand on the shared state: each
// of the core's errors made to happen on demand, messages stored behind the
// core's back, and what the handles did, counted. It is for tests only;
// the core itself is tested on a real nats-server.
//
// Queues whose name starts with "pkg" accumulate: pushes join one package
// (compound message) until it is pulled. Delivery ids are UUIDs, as the
// core's are.
package fakecore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// state is what the handles share: one fake core's queues, deliveries,
// properties and the record of what was done.
type state struct {
	mu        sync.Mutex
	queues    map[string][]gateway.Message // waiting messages; a key: the queue exists
	inflight  map[string]inflight          // by delivery id
	props     map[string]mapping.Props
	defaults  mapping.DefaultList
	meta      map[string]gateway.QueueMeta
	dead      map[string][]gateway.DeadLetter
	sizeErr   map[string]error // a queue's error in QueueStatuses and QueueDetail
	fail      map[string]error // by method name
	nextID    int
	pushes    int
	wake      chan struct{} // closed and replaced on every push
	lastOpts  gateway.PushOptions
	batches   [][]gateway.Message
	sent      []gateway.Message // PushSeq's messages, in order
	abandoned []string
	// deliverOnCancel makes a pull hand out a message at the moment its
	// context ends, as a real core may when the two race.
	deliverOnCancel bool
	waiting         chan struct{} // gets a value whenever a pull starts waiting
}

type inflight struct {
	queue string
	msgs  []gateway.Message
	at    time.Time
}

// Core is the fake core: its handles (Messages, Queues, Inspect) and the
// tests' hand on the state they share. Create it with New.
type Core struct {
	*state
	messagesH *Messages
	queuesH   *Queues
	inspectH  *Inspect
}

// New returns an empty core.
func New() *Core {
	s := &state{
		queues:   make(map[string][]gateway.Message),
		inflight: make(map[string]inflight),
		props:    make(map[string]mapping.Props),
		meta:     make(map[string]gateway.QueueMeta),
		dead:     make(map[string][]gateway.DeadLetter),
		sizeErr:  make(map[string]error),
		fail:     make(map[string]error),
		wake:     make(chan struct{}),
		waiting:  make(chan struct{}, 100),
	}
	return &Core{state: s, messagesH: &Messages{s}, queuesH: &Queues{s}, inspectH: &Inspect{s}}
}

// Messages is the messages handle (push, pull, reply, visibility).
func (f *Core) Messages() *Messages { return f.messagesH }

// Queues is the queues handle (create, delete, properties, metadata).
func (f *Core) Queues() *Queues { return f.queuesH }

// Inspect is the inspection handle (views, messages by id, deliveries,
// dead letters).
func (f *Core) Inspect() *Inspect { return f.inspectH }

// Fail makes method (by name: "PushStream", "Reply", …; "Push" for Push,
// PushWith and PushSeq) return err from now on instead of doing anything;
// a nil err undoes it.
func (f *Core) Fail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, method)
		return
	}
	f.fail[method] = err
}

// FailSize makes queue's view in QueueStatuses and QueueDetail fail with
// err (a stream that does not answer).
func (f *Core) FailSize(queue string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizeErr[queue] = err
}

// DeliverOnCancel makes a waiting pull hand out a message at the moment its
// context ends, as a real core may when the two race.
func (f *Core) DeliverOnCancel() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliverOnCancel = true
}

// Waiting gets a value whenever a pull starts waiting (up to 100 unread).
func (f *Core) Waiting() chan struct{} { return f.waiting }

// Put adds msg to queue without waking the pulls that wait and without
// counting a push: as a message stored behind the core's back.
func (f *Core) Put(queue string, msg gateway.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[queue] = append(f.queues[queue], msg)
}

// AddDeadLetters adds dead letters to queue.
func (f *Core) AddDeadLetters(queue string, dls ...gateway.DeadLetter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[queue] = append(f.dead[queue], dls...)
}

// Size is the number of messages waiting in queue.
func (f *Core) Size(queue string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queues[queue])
}

// QueueCount is the number of queues that exist.
func (f *Core) QueueCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queues)
}

// Pushes counts the messages pushed (batches and push-all included).
func (f *Core) Pushes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pushes
}

// Props are the properties set on queue; false when none are.
func (f *Core) Props(queue string) (mapping.Props, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.props[queue]
	return p, ok
}

// PropsSet counts the queues with properties, and the entries of the
// default-properties list.
func (f *Core) PropsSet() (queues, defaults int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.props), len(f.defaults)
}

// LastOptions are the options of the last PushWith, PushSeq or PushStream.
func (f *Core) LastOptions() gateway.PushOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastOpts
}

// Sent lists the messages PushSeq stored (SQS's sends), in order.
func (f *Core) Sent() []gateway.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// Batches counts the PushBatch calls that stored their messages.
func (f *Core) Batches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches)
}

// Abandoned lists the ids of the deliveries given back with Abandon.
func (f *Core) Abandoned() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.abandoned)
}

// push stores msg; f.mu is held.
func (f *state) push(q string, msg gateway.Message) gateway.AccumState {
	f.pushes++
	msg.Body = bytes.Clone(msg.Body)
	first := len(f.queues[q]) == 0
	f.queues[q] = append(f.queues[q], msg)
	close(f.wake)
	f.wake = make(chan struct{})
	if !strings.HasPrefix(q, "pkg") {
		return gateway.AccumNo
	}
	if first {
		return gateway.AccumNew
	}
	return gateway.AccumYes
}

func validName(q string) error {
	if err := mapping.ValidateQueueName(q); err != nil {
		return fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	return nil
}

// names lists the queues, sorted; f.mu is held.
func (f *state) names() []string {
	names := make([]string, 0, len(f.queues))
	for q := range f.queues {
		names = append(names, q)
	}
	slices.Sort(names)
	return names
}

// take hands out the first message of the first matching queue by name;
// f.mu is held.
func (f *state) take(match func(string) bool) *gateway.Delivery {
	for _, q := range f.names() {
		msgs := f.queues[q]
		if !match(q) || len(msgs) == 0 {
			continue
		}
		f.nextID++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.nextID)
		d := &gateway.Delivery{Queue: q, ID: id, RetryRemaining: 2}
		in := inflight{queue: q, at: time.Now()}
		if strings.HasPrefix(q, "pkg") {
			d.Compound, d.Parts, in.msgs = true, msgs, msgs
			f.queues[q] = nil
		} else {
			d.Message, in.msgs = msgs[0], msgs[:1]
			f.queues[q] = msgs[1:]
		}
		f.inflight[id] = in
		return d
	}
	return nil
}

func (f *state) pull(ctx context.Context, method string, match func(string) bool, create string, wait time.Duration) (*gateway.Delivery, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		f.mu.Lock()
		if err := f.fail[method]; err != nil {
			f.mu.Unlock()
			return nil, err
		}
		if _, ok := f.queues[create]; !ok && create != "" {
			f.queues[create] = nil
		}
		if d := f.take(match); d != nil {
			f.mu.Unlock()
			return d, nil
		}
		wake := f.wake
		f.mu.Unlock()
		if wait == 0 {
			return nil, nil
		}
		select {
		case f.waiting <- struct{}{}:
		default:
		}
		select {
		case <-wake:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.deliverOnCancel {
				if d := f.take(match); d != nil {
					return d, nil
				}
			}
			return nil, ctx.Err()
		}
	}
}

// reply acks (forgets), nacks (requeues) or extends a delivery; f.mu is
// held.
func (f *state) reply(q, id string, kind gateway.ReplyKind) error {
	in, ok := f.inflight[id]
	if !ok || in.queue != q {
		return fmt.Errorf("delivery %s: %w", id, gateway.ErrNotFound)
	}
	switch kind {
	case gateway.Ack:
		delete(f.inflight, id)
	case gateway.Nack:
		delete(f.inflight, id)
		f.queues[q] = append(f.queues[q], in.msgs...)
	}
	return nil
}

// queue is q's view; f.mu is held.
func (f *state) queue(q string) (gateway.QueueInfo, error) {
	if err := f.sizeErr[q]; err != nil {
		return gateway.QueueInfo{}, err
	}
	msgs, ok := f.queues[q]
	if !ok {
		return gateway.QueueInfo{}, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	return gateway.QueueInfo{Name: q, Size: uint64(len(msgs)), Props: mapping.Resolve(f.defaults, q, f.props[q])}, nil
}
