package httpapi

import (
	"net/http"

	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// routes declares the LMQ API on t: each route once, with what a token
// needs to use it (package ops authorizes by it; with no tokens configured
// the needs are not looked at). Pull covers the replies to a delivery.
// Push-all and pull-any (POST and GET without a queue, ?qre=) and the
// queue list act on the queues of the token's scope only.
func (a *api) routes(t *route.Table) {
	const (
		push  = route.RightPush
		pull  = route.RightPull
		admin = route.RightAdmin
	)
	// Push, pull and reply first: the router tries the routes in order,
	// and these are nearly every request (no two routes here match the same
	// path, so the order changes nothing else).
	for _, base := range []string{"/messages", "/msgs"} {
		t.Handle(base+"/{name}", route.OnQueue(push), a.named(a.push), http.MethodPost)
		t.Handle(base+"/{name}", route.OnQueue(pull), a.named(a.pull), http.MethodGet)
		t.Handle(base+"/{name}/{id}", route.OnQueue(pull), a.named(a.reply), http.MethodPost)
	}
	for _, base := range []string{"/messages", "/msgs"} {
		t.Handle(base, route.Listed(push), a.handler(a.pushAll), http.MethodPost)
		t.Handle(base, route.Listed(pull), a.handler(a.pullAny), http.MethodGet)
	}
	t.Handle("/queues/{name}", route.OnQueue(admin), a.named(a.deleteQueue), http.MethodDelete)
	// Beyond LMQ: endpoints LMQ did not have, so nothing an LMQ client sends
	// reaches them (batches and push options are query parameters of LMQ's
	// routes, which LMQ ignored).
	t.Handle("/queues", route.Listed(route.AnyRight), a.handler(a.listQueues), http.MethodGet)
	t.Handle("/queues/{name}", route.OnQueue(route.AnyRight), a.named(a.queueDetail), http.MethodGet)
	t.Handle("/queues/{name}/dead", route.OnQueue(admin), a.named(a.deadInfo), http.MethodGet)
	t.Handle("/queues/{name}/dead", route.OnQueue(admin), a.named(a.deleteDead), http.MethodDelete)
	t.Handle("/queues/{name}/dead/head", route.OnQueue(admin), a.named(a.deadHead), http.MethodGet)
	t.Handle("/queues/{name}/dead/respawn", route.OnQueue(admin), a.named(a.respawnDead), http.MethodPost)
	// A queue's waiting messages by id (messages.go): admin, like its dead
	// letters and the console, rather than any right as GET /queues/{name}:
	// the list shows every producer's bodies, and removing one message is an
	// operator's act, not a consumer's.
	t.Handle("/queues/{name}/messages", route.OnQueue(admin), a.named(a.listMessages), http.MethodGet)
	t.Handle("/queues/{name}/messages/{id}", route.OnQueue(admin), a.named(a.deleteMessage), http.MethodDelete)
	// Moving one to another queue (?to=) also needs admin on that queue,
	// checked by the handler (as PATCH /properties checks dead_letter_queue).
	t.Handle("/queues/{name}/messages/{id}/move", route.OnQueue(admin), a.named(a.moveMessage), http.MethodPost)
	// The deliveries in flight (deliveries.go): admin, like the waiting
	// messages (they name the clients holding them). A delivery found by
	// its id alone is checked against the token's scope once its queue is
	// known.
	t.Handle("/queues/{name}/deliveries", route.OnQueue(admin), a.named(a.listDeliveries), http.MethodGet)
	t.Handle("/deliveries/{id}", route.Listed(admin), a.handler(a.findDelivery), http.MethodGet)
	// Purge: the queue's waiting messages go, the queue stays (an admin's
	// act, like deleting it).
	t.Handle("/queues/{name}/messages", route.OnQueue(admin), a.named(a.purge), http.MethodDelete)
	for _, base := range []string{"/properties", "/props"} {
		// The default-properties list applies to every queue.
		t.Handle(base, route.OnAll(admin), a.handler(a.getDefaults), http.MethodGet)
		t.Handle(base, route.OnAll(admin), a.handler(a.putDefaults), http.MethodPut)
		t.Handle(base, route.OnAll(admin), a.handler(a.deleteDefaults), http.MethodDelete)
		t.Handle(base+"/{name}", route.OnQueue(admin), a.named(a.getProps), http.MethodGet)
		t.Handle(base+"/{name}", route.OnQueue(admin), a.named(a.patchProps), http.MethodPatch)
		t.Handle(base+"/{name}", route.OnQueue(admin), a.named(a.deleteProps), http.MethodDelete)
	}
	// Beyond LMQ: the OpenAPI description of this API, behind the same
	// authentication as everything but health.
	t.HandleFunc("/openapi.yaml", route.Authenticated, serveOpenAPI, http.MethodGet, http.MethodHead)
}
