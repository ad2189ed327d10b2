package dispatch

import (
	"bytes"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Notifications (package doc, "Pulling"): published here after every
// stored push or release while other gateways are known to be running, and
// received here from every gateway.

// Notify wakes the clients waiting on queue, on every gateway: it is called
// after a message became available there.
//
// The message's priority is not known here: the queue's priority property is
// assumed, and a queue that ever saw priorities looks at its levels' counts.
func (d *Dispatcher) Notify(queue string) {
	p := d.props.Effective(queue).Priority
	if q := d.queues.local(queue); q != nil {
		q.mu.Lock()
		if q.prio.seen {
			q.probeLocked()
		}
		q.mu.Unlock()
	}
	d.NotifyLevel(queue, p)
}

// NotifyLevel is Notify for a message of priority p.
func (d *Dispatcher) NotifyLevel(queue string, p int) {
	var enc string
	if q := d.queues.local(queue); q != nil {
		q.notifyLevel(p)
		enc = q.enc
	} else {
		enc = mapping.EncodeName(queue)
		d.queues.rememberLevel(enc, p)
	}
	d.queues.notifyAny(enc)
	if d.peers.Any() {
		// Only other gateways' waiting clients need it (package peers says why
		// leaving it out while alone is safe).
		_ = d.bus.Publish(mapping.NotifyPrefix+enc, d.notifyPayload(p))
	}
}

// onNotify receives every gateway's notifications (lmq.n.<enc>).
func (d *Dispatcher) onNotify(m bus.Msg) {
	id, p := parseNotifyPayload(m.Data, len(d.idPfx))
	if bytes.Equal(id, d.idPfx) {
		return // our own, already applied locally
	}
	if len(id) == len(d.idPfx) {
		d.peers.Heard(id) // a gateway that notifies is a peer (older ones send no hellos)
	}
	_, enc, ok := mapping.EncFromSubject(m.Subject)
	if !ok {
		return
	}
	if q := d.queues.localByEnc(enc); q != nil {
		q.notifyLevel(p)
	} else {
		d.queues.rememberLevel(enc, p)
	}
	d.queues.notifyAny(enc)
	d.TestSignals.Notified.Signal(enc)
}
