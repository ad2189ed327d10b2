package httpapi

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

// fakeCore is an in-memory Core for testing the HTTP front end alone, in the
// manner of rpc's. Queues whose name starts with "pkg" accumulate: pushes
// join one package (compound message) until it is pulled. fail makes a
// method return an error instead of doing anything, to check how each of the
// core's errors is answered.
type fakeCore struct {
	mu        sync.Mutex
	queues    map[string][]gateway.Message // waiting messages; a key: the queue exists
	inflight  map[string]fakeInflight      // by delivery id
	props     map[string]mapping.Props
	defaults  mapping.DefaultList
	dead      map[string][]gateway.DeadLetter
	sizeErr   map[string]error // Queue's error for a queue (GET /queues)
	nextID    int
	wake      chan struct{} // closed and replaced on every push
	fail      map[string]error
	lastOpts  gateway.PushOptions
	batches   [][]gateway.Message
	abandoned []string
	// deliverOnCancel makes a pull hand out a message at the moment its
	// context ends, as a real core may when the two race.
	deliverOnCancel bool
	waiting         chan struct{} // gets a value whenever a pull starts waiting
}

type fakeInflight struct {
	queue string
	msgs  []gateway.Message
}

var _ Core = (*fakeCore)(nil)

func newFakeCore() *fakeCore {
	return &fakeCore{
		queues:   make(map[string][]gateway.Message),
		inflight: make(map[string]fakeInflight),
		props:    make(map[string]mapping.Props),
		dead:     make(map[string][]gateway.DeadLetter),
		sizeErr:  make(map[string]error),
		wake:     make(chan struct{}),
		fail:     make(map[string]error),
		waiting:  make(chan struct{}, 100),
	}
}

// failing sets the error method returns from now on.
func (f *fakeCore) failing(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = err
}

// injected is the error set for method, if any; f.mu is held.
func (f *fakeCore) injected(method string) error { return f.fail[method] }

func (f *fakeCore) push(q string, msg gateway.Message) gateway.AccumState {
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

func (f *fakeCore) PushStream(_ context.Context, q string, msg gateway.Message, body io.Reader, opts gateway.PushOptions) (gateway.AccumState, error) {
	// Read as the core does: the handler's limit shows as the reader's error.
	b, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("reading body: %w", err)
	}
	msg.Body = b
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("PushStream"); err != nil {
		return "", err
	}
	f.lastOpts = opts
	return f.push(q, msg), nil
}

func (f *fakeCore) PushAll(_ context.Context, re *regexp.Regexp, msg gateway.Message, scope gateway.Scope) (map[string]gateway.AccumState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("PushAll"); err != nil {
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

// take hands out the first message of a matching queue; f.mu is held.
func (f *fakeCore) take(match func(string) bool) *gateway.Delivery {
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
		in := fakeInflight{queue: q}
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

func (f *fakeCore) pull(ctx context.Context, method string, match func(string) bool, create string, wait time.Duration) (*gateway.Delivery, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		f.mu.Lock()
		if err := f.injected(method); err != nil {
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

func (f *fakeCore) Pull(ctx context.Context, q string, wait time.Duration) (*gateway.Delivery, error) {
	return f.pull(ctx, "Pull", func(s string) bool { return s == q }, q, wait)
}

func (f *fakeCore) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope gateway.Scope) (*gateway.Delivery, error) {
	return f.pull(ctx, "PullAny", func(q string) bool { return re.MatchString(q) && scope.Allows(q) }, "", wait)
}

func (f *fakeCore) Abandon(_ context.Context, d *gateway.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandoned = append(f.abandoned, d.ID)
	if in, ok := f.inflight[d.ID]; ok {
		delete(f.inflight, d.ID)
		f.queues[in.queue] = append(slices.Clone(in.msgs), f.queues[in.queue]...)
	}
}

func (f *fakeCore) abandonedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.abandoned)
}

func (f *fakeCore) Reply(_ context.Context, q, id string, kind gateway.ReplyKind) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("Reply"); err != nil {
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

func (f *fakeCore) DeleteQueue(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DeleteQueue"); err != nil {
		return err
	}
	if _, ok := f.queues[q]; !ok {
		return fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	delete(f.queues, q)
	delete(f.props, q)
	return nil
}

func (f *fakeCore) QueueProps(_ context.Context, q string) (mapping.Effective, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("QueueProps"); err != nil {
		return mapping.Effective{}, err
	}
	return mapping.Resolve(f.defaults, q, f.props[q]), nil
}

func (f *fakeCore) UpdateProps(_ context.Context, q string, patch mapping.Props) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("UpdateProps"); err != nil {
		return err
	}
	f.props[q] = f.props[q].Merge(patch)
	if _, ok := f.queues[q]; !ok {
		f.queues[q] = nil
	}
	return nil
}

func (f *fakeCore) ResetProps(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("ResetProps"); err != nil {
		return err
	}
	delete(f.props, q)
	return nil
}

func (f *fakeCore) DefaultProps(context.Context) (mapping.DefaultList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DefaultProps"); err != nil {
		return nil, err
	}
	return f.defaults, nil
}

func (f *fakeCore) SetDefaultProps(_ context.Context, l mapping.DefaultList) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("SetDefaultProps"); err != nil {
		return err
	}
	f.defaults = l
	return nil
}

func (f *fakeCore) PushBatch(_ context.Context, q string, msgs []gateway.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("PushBatch"); err != nil {
		return err
	}
	f.batches = append(f.batches, msgs)
	for _, m := range msgs {
		f.push(q, m)
	}
	return nil
}

func (f *fakeCore) QueueNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.queues))
	for q := range f.queues {
		names = append(names, q)
	}
	slices.Sort(names)
	return names
}

func (f *fakeCore) Queue(_ context.Context, q string) (gateway.QueueInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.sizeErr[q]; err != nil {
		return gateway.QueueInfo{}, err
	}
	msgs, ok := f.queues[q]
	if !ok {
		return gateway.QueueInfo{}, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	return gateway.QueueInfo{Name: q, Size: uint64(len(msgs)), Props: mapping.Resolve(f.defaults, q, f.props[q])}, nil
}

func (f *fakeCore) QueueDetail(ctx context.Context, q string) (gateway.QueueDetail, error) {
	qi, err := f.Queue(ctx, q)
	if err != nil {
		return gateway.QueueDetail{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("QueueDetail"); err != nil {
		return gateway.QueueDetail{}, err
	}
	qi.Bytes = 10 * qi.Size
	qi.DeadLetters = uint64(len(f.dead[q]))
	return qi, nil
}

func (f *fakeCore) QueueStatuses(ctx context.Context, scope gateway.Scope) ([]gateway.QueueStatus, error) {
	var out []gateway.QueueStatus
	for _, name := range f.QueueNames() {
		if !scope.Allows(name) {
			continue
		}
		qi, err := f.Queue(ctx, name)
		if errors.Is(err, gateway.ErrNotFound) {
			continue
		}
		out = append(out, gateway.QueueStatus{QueueInfo: gateway.QueueInfo{Name: name, Size: qi.Size}, Err: err})
	}
	return out, nil
}

func (f *fakeCore) DeadLetterHead(_ context.Context, q string) (*gateway.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DeadLetterHead"); err != nil {
		return nil, err
	}
	if len(f.dead[q]) == 0 {
		return nil, nil
	}
	dl := f.dead[q][0]
	return &dl, nil
}

func (f *fakeCore) RespawnDeadLetters(_ context.Context, q string, n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("RespawnDeadLetters"); err != nil {
		return 0, err
	}
	n = min(n, len(f.dead[q]))
	for _, dl := range f.dead[q][:n] {
		f.push(q, dl.Message)
	}
	f.dead[q] = f.dead[q][n:]
	return n, nil
}

func (f *fakeCore) DeleteDeadLetters(_ context.Context, q string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DeleteDeadLetters"); err != nil {
		return 0, err
	}
	n := uint64(len(f.dead[q]))
	delete(f.dead, q)
	return n, nil
}
