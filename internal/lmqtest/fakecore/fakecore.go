// Package fakecore is an in-memory queue core for the front ends' tests
// (httpapi, rpc; sqs embeds it and adds queue metadata): it has the methods
// of their Core interfaces (each front end's Core takes it in every field),
// so that a front end's handling of requests and answers can be tested
// without NATS, and each of the core's errors can be made to happen on
// demand. It is for tests only; the core itself is tested
// on a real nats-server.
//
// Queues whose name starts with "pkg" accumulate: pushes join one package
// (compound message) until it is pulled. Delivery ids are UUIDs, as the
// core's are.
package fakecore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Core is the fake core. Create it with New.
type Core struct {
	mu        sync.Mutex
	queues    map[string][]gateway.Message // waiting messages; a key: the queue exists
	inflight  map[string]inflight          // by delivery id
	props     map[string]mapping.Props
	defaults  mapping.DefaultList
	dead      map[string][]gateway.DeadLetter
	sizeErr   map[string]error // a queue's error in QueueStatuses and QueueDetail
	fail      map[string]error // by method name
	nextID    int
	pushes    int
	wake      chan struct{} // closed and replaced on every push
	lastOpts  gateway.PushOptions
	batches   [][]gateway.Message
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

// New returns an empty core.
func New() *Core {
	return &Core{
		queues:   make(map[string][]gateway.Message),
		inflight: make(map[string]inflight),
		props:    make(map[string]mapping.Props),
		dead:     make(map[string][]gateway.DeadLetter),
		sizeErr:  make(map[string]error),
		fail:     make(map[string]error),
		wake:     make(chan struct{}),
		waiting:  make(chan struct{}, 100),
	}
}

// Fail makes method (by name: "PushStream", "Reply", …) return err from
// now on instead of doing anything; a nil err undoes it.
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

// Queues is the number of queues that exist.
func (f *Core) Queues() int {
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

// LastOptions are the options of the last PushStream.
func (f *Core) LastOptions() gateway.PushOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastOpts
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
func (f *Core) push(q string, msg gateway.Message) gateway.AccumState {
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

// Push stores msg in queue q.
func (f *Core) Push(ctx context.Context, q string, msg gateway.Message) (gateway.AccumState, error) {
	return f.PushWith(ctx, q, msg, gateway.PushOptions{})
}

// PushWith is Push with options, which it records (LastOptions).
func (f *Core) PushWith(_ context.Context, q string, msg gateway.Message, opts gateway.PushOptions) (gateway.AccumState, error) {
	if err := validName(q); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Push"]; err != nil {
		return "", err
	}
	f.lastOpts = opts
	return f.push(q, msg), nil
}

// PushStream is Push of a body read from body.
func (f *Core) PushStream(_ context.Context, q string, msg gateway.Message, body io.Reader, opts gateway.PushOptions) (gateway.AccumState, error) {
	// Read as the core does: the handler's limit shows as the reader's error.
	b, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("reading body: %w", err)
	}
	msg.Body = b
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushStream"]; err != nil {
		return "", err
	}
	f.lastOpts = opts
	return f.push(q, msg), nil
}

// PushAll pushes msg to every queue of scope whose name re matches.
func (f *Core) PushAll(_ context.Context, re *regexp.Regexp, msg gateway.Message, scope gateway.Scope) (map[string]gateway.AccumState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushAll"]; err != nil {
		return nil, err
	}
	out := make(map[string]gateway.AccumState)
	for q := range f.queues {
		if re.MatchString(q) && scope.Allows(q) {
			out[q] = f.push(q, msg)
		}
	}
	return out, nil
}

// PushBatch stores msgs in queue q.
func (f *Core) PushBatch(_ context.Context, q string, msgs []gateway.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushBatch"]; err != nil {
		return err
	}
	f.batches = append(f.batches, msgs)
	for _, m := range msgs {
		f.push(q, m)
	}
	return nil
}

// take hands out the first message of the first matching queue by name;
// f.mu is held.
func (f *Core) take(match func(string) bool) *gateway.Delivery {
	names := make([]string, 0, len(f.queues))
	for q := range f.queues {
		names = append(names, q)
	}
	slices.Sort(names)
	for _, q := range names {
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

func (f *Core) pull(ctx context.Context, method string, match func(string) bool, create string, wait time.Duration) (*gateway.Delivery, error) {
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

// Pull hands out a message of queue q (creating it), waiting up to wait
// (negative: until ctx ends) for one.
func (f *Core) Pull(ctx context.Context, q string, wait time.Duration) (*gateway.Delivery, error) {
	if err := validName(q); err != nil {
		return nil, err
	}
	return f.pull(ctx, "Pull", func(s string) bool { return s == q }, q, wait)
}

// PullAny is Pull over the queues of scope whose name re matches.
func (f *Core) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope gateway.Scope) (*gateway.Delivery, error) {
	return f.pull(ctx, "PullAny", func(q string) bool { return re.MatchString(q) && scope.Allows(q) }, "", wait)
}

// Abandon puts a delivery's messages back at the head of its queue.
func (f *Core) Abandon(_ context.Context, d *gateway.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandoned = append(f.abandoned, d.ID)
	if in, ok := f.inflight[d.ID]; ok {
		delete(f.inflight, d.ID)
		f.queues[in.queue] = append(slices.Clone(in.msgs), f.queues[in.queue]...)
	}
}

// Reply acks (forgets), nacks (requeues) or extends a delivery.
func (f *Core) Reply(_ context.Context, q, id string, kind gateway.ReplyKind) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Reply"]; err != nil {
		return err
	}
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

// DeleteQueue deletes queue q and its properties.
func (f *Core) DeleteQueue(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeleteQueue"]; err != nil {
		return err
	}
	if _, ok := f.queues[q]; !ok {
		return fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	delete(f.queues, q)
	delete(f.props, q)
	return nil
}

// Purge forgets queue q's waiting messages; its deliveries in flight
// stay answerable.
func (f *Core) Purge(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Purge"]; err != nil {
		return err
	}
	if _, ok := f.queues[q]; !ok {
		return fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	f.queues[q] = nil
	return nil
}

// QueueProps are queue q's effective properties.
func (f *Core) QueueProps(_ context.Context, q string) (mapping.Effective, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["QueueProps"]; err != nil {
		return mapping.Effective{}, err
	}
	return mapping.Resolve(f.defaults, q, f.props[q]), nil
}

// UpdateProps merges patch into queue q's properties (creating it).
func (f *Core) UpdateProps(_ context.Context, q string, patch mapping.Props) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["UpdateProps"]; err != nil {
		return err
	}
	f.props[q] = f.props[q].Merge(patch)
	if _, ok := f.queues[q]; !ok {
		f.queues[q] = nil
	}
	return nil
}

// ResetProps forgets queue q's properties.
func (f *Core) ResetProps(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["ResetProps"]; err != nil {
		return err
	}
	delete(f.props, q)
	return nil
}

// DefaultProps is the default-properties list.
func (f *Core) DefaultProps(context.Context) (mapping.DefaultList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DefaultProps"]; err != nil {
		return nil, err
	}
	return f.defaults, nil
}

// SetDefaultProps replaces the default-properties list.
func (f *Core) SetDefaultProps(_ context.Context, l mapping.DefaultList) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["SetDefaultProps"]; err != nil {
		return err
	}
	f.defaults = l
	return nil
}

// QueueNames lists the queues, sorted.
func (f *Core) QueueNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.queues))
	for q := range f.queues {
		names = append(names, q)
	}
	slices.Sort(names)
	return names
}

// queue is q's view; f.mu is held.
func (f *Core) queue(q string) (gateway.QueueInfo, error) {
	if err := f.sizeErr[q]; err != nil {
		return gateway.QueueInfo{}, err
	}
	msgs, ok := f.queues[q]
	if !ok {
		return gateway.QueueInfo{}, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	return gateway.QueueInfo{Name: q, Size: uint64(len(msgs)), Props: mapping.Resolve(f.defaults, q, f.props[q])}, nil
}

// QueueDetail is queue q's view (each message counts 10 bytes).
func (f *Core) QueueDetail(_ context.Context, q string) (gateway.QueueDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qi, err := f.queue(q)
	if err != nil {
		return gateway.QueueDetail{}, err
	}
	if err := f.fail["QueueDetail"]; err != nil {
		return gateway.QueueDetail{}, err
	}
	qi.Bytes = 10 * qi.Size
	qi.DeadLetters = uint64(len(f.dead[q]))
	return qi, nil
}

// QueueStatuses is the view of every queue of scope, sorted by name.
func (f *Core) QueueStatuses(_ context.Context, scope gateway.Scope) ([]gateway.QueueStatus, error) {
	names := f.QueueNames()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gateway.QueueStatus
	for _, name := range names {
		if !scope.Allows(name) {
			continue
		}
		qi, err := f.queue(name)
		if errors.Is(err, gateway.ErrNotFound) {
			continue
		}
		out = append(out, gateway.QueueStatus{QueueInfo: gateway.QueueInfo{Name: name, Size: qi.Size}, Err: err})
	}
	return out, nil
}

// DeadLetterHead is queue q's oldest dead letter; nil when there is none.
func (f *Core) DeadLetterHead(_ context.Context, q string) (*gateway.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeadLetterHead"]; err != nil {
		return nil, err
	}
	if len(f.dead[q]) == 0 {
		return nil, nil
	}
	dl := f.dead[q][0]
	return &dl, nil
}

// RespawnDeadLetters pushes up to n of queue q's dead letters back.
func (f *Core) RespawnDeadLetters(_ context.Context, q string, n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["RespawnDeadLetters"]; err != nil {
		return 0, err
	}
	n = min(n, len(f.dead[q]))
	for _, dl := range f.dead[q][:n] {
		f.push(q, dl.Message)
	}
	f.dead[q] = f.dead[q][n:]
	return n, nil
}

// DeleteDeadLetters forgets queue q's dead letters.
func (f *Core) DeleteDeadLetters(_ context.Context, q string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeleteDeadLetters"]; err != nil {
		return 0, err
	}
	n := uint64(len(f.dead[q]))
	delete(f.dead, q)
	return n, nil
}

// Messages lists up to n of queue q's waiting messages; a message's id
// (Seq) is its place in the queue, from 1 (the fake has no stream
// sequences).
func (f *Core) Messages(_ context.Context, q string, n int, withBody bool) ([]gateway.Peeked, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Messages"]; err != nil {
		return nil, err
	}
	if n < 1 || n > gateway.MaxPeek {
		return nil, fmt.Errorf("%w: n out of range", gateway.ErrInvalid)
	}
	msgs, ok := f.queues[q]
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	out := make([]gateway.Peeked, 0, min(n, len(msgs)))
	for i, m := range msgs[:min(n, len(msgs))] {
		p := gateway.Peeked{Seq: uint64(i + 1), ContentType: m.ContentType, Retry: -1, Size: int64(len(m.Body))}
		if withBody {
			p.Body = m.Body
		}
		out = append(out, p)
	}
	return out, nil
}

// DeleteMessage removes queue q's waiting message of id seq (its place in
// the queue, as Messages lists it).
func (f *Core) DeleteMessage(_ context.Context, q string, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeleteMessage"]; err != nil {
		return err
	}
	if seq == 0 {
		return fmt.Errorf("%w: id 0", gateway.ErrInvalid)
	}
	msgs, ok := f.queues[q]
	if !ok || seq > uint64(len(msgs)) {
		return fmt.Errorf("queue %q message %d: %w", q, seq, gateway.ErrNotFound)
	}
	f.queues[q] = slices.Delete(msgs, int(seq-1), int(seq))
	return nil
}

// MoveMessage moves queue q's waiting message of id seq to the end of
// queue target (made when it does not exist).
func (f *Core) MoveMessage(_ context.Context, q string, seq uint64, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["MoveMessage"]; err != nil {
		return err
	}
	if seq == 0 || target == "" || target == q {
		return fmt.Errorf("%w: id 0 or target %q", gateway.ErrInvalid, target)
	}
	msgs, ok := f.queues[q]
	if !ok || seq > uint64(len(msgs)) {
		return fmt.Errorf("queue %q message %d: %w", q, seq, gateway.ErrNotFound)
	}
	m := msgs[seq-1]
	f.queues[q] = slices.Delete(msgs, int(seq-1), int(seq))
	f.queues[target] = append(f.queues[target], m)
	return nil
}

// fakeTimeout is the time left the fake's deliveries show (Deliveries).
const fakeTimeout = 30 * time.Second

func (f *Core) infoLocked(id string, in inflight) gateway.DeliveryInfo {
	return gateway.DeliveryInfo{ID: id, Queue: in.queue, Gateway: "00000000",
		Client:      gateway.Client{Kind: gateway.ClientHTTP, Addr: "192.0.2.1:1234"},
		DeliveredAt: in.at, Deadline: in.at.Add(fakeTimeout), Receives: 1, RetryRemaining: 2}
}

// Deliveries lists queue q's deliveries not yet answered, oldest first.
func (f *Core) Deliveries(_ context.Context, q string) (gateway.DeliveryList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Deliveries"]; err != nil {
		return gateway.DeliveryList{}, err
	}
	if _, ok := f.queues[q]; !ok {
		return gateway.DeliveryList{}, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	var l gateway.DeliveryList
	for id, in := range f.inflight {
		if in.queue == q {
			l.Deliveries = append(l.Deliveries, f.infoLocked(id, in))
		}
	}
	slices.SortFunc(l.Deliveries, func(a, b gateway.DeliveryInfo) int { return strings.Compare(a.ID, b.ID) })
	return l, nil
}

// FindDelivery describes the delivery not yet answered whose id is id.
func (f *Core) FindDelivery(_ context.Context, id string) (gateway.DeliveryInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.inflight[id]
	if !ok {
		return gateway.DeliveryInfo{}, fmt.Errorf("delivery %s: %w", id, gateway.ErrNotFound)
	}
	return f.infoLocked(id, in), nil
}
