package rpc

// purge(name) (beyond LMQ) removes every waiting message of the queue; the
// queue, its properties and its dead letters stay. "ok"; an unknown queue
// is the error not_found (unlike delete, which LMQ answered "ok" for any
// name: purge has no LMQ client to stay compatible with, and a typo in a
// queue name should not look like a purge).
func (c *conn) purge(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	if err := c.s.core.Queues.Purge(c.ctx, name); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}
