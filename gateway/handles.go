package gateway

// The core is handed out as handles, one per noun, each a view of the same
// shared state (core): a front end takes the handles it uses and declares
// the few methods it calls of each (its Core), and the accumulator,
// upgrade and migrate get typed handles (Parts, Logs) instead of methods
// on the gateway. The Gateway itself keeps what belongs to its owner:
// start and stop, identity, peers, store health, the rates bus and shared
// buckets.

// Gateway is the core. Create it with New; it is safe for concurrent use,
// and so are its handles.
type Gateway struct {
	*core
	messages *Messages
	queues   *Queues
	inspect  *Inspect
	parts    *Parts
	logs     *Logs
}

func newGateway(c *core) *Gateway {
	return &Gateway{
		core:     c,
		messages: &Messages{c},
		queues:   &Queues{c},
		inspect:  &Inspect{c},
		parts:    &Parts{c},
		logs:     &Logs{c},
	}
}

// Messages is the messages handle: push (one, with options, streamed, in a
// batch, to every matching queue), pull (one queue, any matching queue),
// reply, visibility, and giving deliveries back (abandoned, at shutdown,
// at a client's disconnect).
type Messages struct{ *core }

// Queues is the queues handle: create, delete, list and purge queues, their
// properties and the default-properties list, and the queue metadata of
// front ends that say more than LMQ (SQS).
type Queues struct{ *core }

// Inspect is the inspection handle: what a queue holds (sizes, placement,
// peeks, waiting messages by id, dead letters) and the deliveries in
// flight and pulls waiting; beyond looking, an operator's hand on single
// messages (delete, move) and on dead letters (respawn, delete).
type Inspect struct{ *core }

// Parts is the accumulator's handle: a part's encoding, storing and
// content, and dropping a body from the Object Store.
type Parts struct{ *core }

// Logs is the handle of those that move stored messages as they are (the
// accumulator, upgrade and migrate): copies stored into a queue, a queue's
// log read, a queue registered and its shard made without a push.
type Logs struct{ *core }

// Messages is the messages handle (push, pull, reply, visibility).
func (g *Gateway) Messages() *Messages { return g.messages }

// Queues is the queues handle (create, delete, properties, metadata).
func (g *Gateway) Queues() *Queues { return g.queues }

// Inspect is the inspection handle (peeks, deliveries, dead letters).
func (g *Gateway) Inspect() *Inspect { return g.inspect }

// Parts is the accumulator's handle.
func (g *Gateway) Parts() *Parts { return g.parts }

// Logs is the handle for moving stored messages as they are.
func (g *Gateway) Logs() *Logs { return g.logs }
