package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// The queues' properties are package props' (gateway/props): the bucket,
// its mirror and its writes. What stays here is what a queue's life adds:
// names are validated, room for a new queue is taken, the queue is created
// and its consumer follows its new timeout.

// QueueProps returns the queue's effective properties without creating it.
func (g *Queues) QueueProps(_ context.Context, queue string) (mapping.Effective, error) {
	if err := validName(queue); err != nil {
		return mapping.Effective{}, err
	}
	return g.props.Effective(queue), nil
}

// OwnProps returns the properties set on the queue itself (without the
// defaults), for the console's "where does this value come from".
func (g *Queues) OwnProps(_ context.Context, queue string) (mapping.Props, error) {
	if err := validName(queue); err != nil {
		return mapping.Props{}, err
	}
	return g.props.Own(queue), nil
}

// UpdateProps merges patch into the queue's own properties, creating the queue.
func (g *Queues) UpdateProps(ctx context.Context, queue string, patch mapping.Props) error {
	if err := validName(queue); err != nil {
		return err
	}
	if patch.DeadLetterQueue != nil && *patch.DeadLetterQueue == queue {
		// (Through the default list it is taken as none: package redrive.)
		return fmt.Errorf("%w: dead_letter_queue: a queue cannot be its own dead-letter queue", ErrInvalid)
	}
	// The properties are written before the queue is created, so that a new
	// queue's consumer starts with the AckWait of its own timeout (AckWait is
	// only ever raised later: lowering it under deliveries in flight would
	// have JetStream hand them out a second time).
	// Room for the queue is taken first: properties written for a queue
	// then refused would wait for whoever creates it next.
	release, err := g.reg.Reserve(ctx, queue)
	if err != nil {
		return err
	}
	defer release()
	if err := g.props.Update(ctx, queue, patch); err != nil {
		return err
	}
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return err
	}
	return g.disp.ApplyProps(ctx, queue)
}

// ResetProps drops the queue's own properties (back to the defaults), creating
// the queue as LMQ's update_props without properties did.
func (g *Queues) ResetProps(ctx context.Context, queue string) error {
	if err := validName(queue); err != nil {
		return err
	}
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return err
	}
	if err := g.dropOwnProps(ctx, queue); err != nil {
		return err
	}
	return g.disp.ApplyProps(ctx, queue)
}

// dropOwnProps drops the queue's own properties (a deleted queue's too).
func (g *core) dropOwnProps(ctx context.Context, queue string) error {
	return g.props.Drop(ctx, queue)
}

// DefaultProps returns the default-properties list.
func (g *Queues) DefaultProps(context.Context) (mapping.DefaultList, error) {
	return g.props.Defaults(), nil
}

// SetDefaultProps replaces the default-properties list (nil or empty clears it).
func (g *Queues) SetDefaultProps(ctx context.Context, list mapping.DefaultList) error {
	return g.props.SetDefaults(ctx, list)
}

func validName(queue string) error { return store.CheckQueueName(queue) }
