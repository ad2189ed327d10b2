package fakecore

import (
	"context"
	"fmt"
	"maps"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Queues is the fake queues handle (gateway.Queues): create, delete, list
// and purge queues, their properties, the default-properties list and
// SQS's queue metadata.
type Queues struct{ *state }

// CreateQueue makes queue q; false when it exists already.
func (f *Queues) CreateQueue(_ context.Context, q string) (bool, error) {
	if err := validName(q); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["CreateQueue"]; err != nil {
		return false, err
	}
	if _, ok := f.queues[q]; ok {
		return false, nil
	}
	f.queues[q] = nil
	return true, nil
}

// QueueExists reports whether queue q exists.
func (f *Queues) QueueExists(_ context.Context, q string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.queues[q]
	return ok, nil
}

// DeleteQueue deletes queue q and its properties.
func (f *Queues) DeleteQueue(_ context.Context, q string) error {
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
func (f *Queues) Purge(_ context.Context, q string) error {
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

// QueueNames lists the queues, sorted.
func (f *Queues) QueueNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names()
}

// QueueProps are queue q's effective properties.
func (f *Queues) QueueProps(_ context.Context, q string) (mapping.Effective, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["QueueProps"]; err != nil {
		return mapping.Effective{}, err
	}
	return mapping.Resolve(f.defaults, q, f.props[q]), nil
}

// UpdateProps merges patch into queue q's properties (creating it).
func (f *Queues) UpdateProps(_ context.Context, q string, patch mapping.Props) error {
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
func (f *Queues) ResetProps(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["ResetProps"]; err != nil {
		return err
	}
	delete(f.props, q)
	return nil
}

// DefaultProps is the default-properties list.
func (f *Queues) DefaultProps(context.Context) (mapping.DefaultList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DefaultProps"]; err != nil {
		return nil, err
	}
	return f.defaults, nil
}

// SetDefaultProps replaces the default-properties list.
func (f *Queues) SetDefaultProps(_ context.Context, l mapping.DefaultList) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["SetDefaultProps"]; err != nil {
		return err
	}
	f.defaults = l
	return nil
}

// QueueMeta is what is kept about queue q beyond its properties (zero when
// nothing is).
func (f *Queues) QueueMeta(_ context.Context, q string) (gateway.QueueMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.meta[q]
	m.Attrs, m.Tags = maps.Clone(m.Attrs), maps.Clone(m.Tags)
	return m, nil
}

// UpdateQueueMeta changes queue q's metadata under fn.
func (f *Queues) UpdateQueueMeta(_ context.Context, q string, fn func(*gateway.QueueMeta)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.meta[q]
	fn(&m)
	f.meta[q] = m
	return nil
}
