// Package accumulator implements LMQ accumulation (the accum property): the
// pushes to a queue during a window of accum seconds become one compound
// message. It is the core's gateway.Accumulator, and every piece of its state
// lives in JetStream, so any gateway can finish what another one started.
//
// Where parts live: in the queue's shard stream, on mapping.PartSubject
// (lmq.a.<kk>.<enc>), which the queue's consumer does not read, each tagged with
// its window's id (header Lmq-Window). A push answers once its part is stored.
// Windows live in the KV bucket LMQ_ACCUM. The pointer w.<enc> names the
// queue's open window: its id, its deadline (open time + accum) and the
// retry, both fixed at opening, and the gateway that opened it. The push that
// creates the pointer answers "new"; a push that finds it answers "yes".
//
// Who closes a window: every gateway watches the bucket and keeps the
// deadlines of all windows in one min-heap, served by one goroutine with one
// timer; at most 8 closes run at once, so idle queues cost nothing. At the
// deadline (other gateways wait half a second longer), a gateway creates the
// close job j.<enc>.<id> with expected revision 0. The one that succeeds runs
// it; one that finds the job there checks it at once, as below (its runner
// may be dead: a gateway that stopped between creating the job and removing
// the pointer). The job is a small state machine (closing → publishing →
// published → removed), written with expected revisions and renewing a 30 s
// lease. A window's close waits until every earlier window of the queue has
// stored its compound, so compounds become available in window order. When
// its runner dies (nobody answers on that gateway's liveness subject) or its
// lease runs out, another gateway takes it over. A restarted gateway resumes
// jobs and overdue windows from the watch.
//
// Which parts a window gets: the runner first removes the pointer (from then
// on pushes open a new window at once). Then it fixes the cut, the stream's
// last sequence, in the job. A part belongs to its window if and only if its
// sequence is ≤ the cut. After storing its part, a push reads the pointer
// again (from the stream leader). If it has not changed, the cut, read
// later, will cover the part. If it has changed, the push reads the cut from
// the job, or fixes the cut itself if the runner has not done so yet. A part
// past the cut is removed and pushed again, into the next window. So no part
// is lost, none is left outside every window, and none is in two.
//
// How duplicates are prevented: each window has one close job (expected
// revision 0), and only the job's current owner stores the compound message.
// Before storing it, the owner records the state publishing and LQ, the
// stream's last sequence. The compound holds the tagged parts up to the cut
// in stream order (push order), each with its own metadata, and it carries
// the window's retry. The parts are removed only after the job says
// published; then the job is removed. A run that finds the job still in
// publishing (after a crash, a timeout or a takeover) looks for a message
// tagged with the window after LQ before it stores the compound again.
//
// Nats-Msg-Id and atomic batches are not used for this. The core releases a
// message (nack, timeout) by re-publishing it with all its headers, so
// JetStream would drop a copy carrying a Nats-Msg-Id as a duplicate, and
// would refuse one carrying Nats-Batch-* headers. One case is not caught.
// Suppose a runner stores the compound and stops before it records
// published, and the compound is then delivered and acked before the job is
// resumed. The resumed run stores the compound a second time. Deadlines and
// leases are wall-clock times, so gateways on different hosts need
// synchronized clocks.
package accumulator
