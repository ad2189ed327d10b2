// Package accumulator implements LMQ accumulation (the accum property): the
// pushes to a queue during a window of accum seconds become one compound
// message. It is the core's gateway.Accumulator and keeps every piece of
// state in JetStream, so that any gateway can finish what another started.
//
// Where parts live: in the queue's own stream, on mapping.PartSubject
// (lmq.a.<enc>), which the queue's consumer does not see; each part is
// tagged with its window's id (header Lmq-Window). A push answers once its
// part is stored. Windows live in the KV bucket LMQ_ACCUM: the pointer
// w.<enc> names a queue's open window (id, deadline = open time + accum, the
// retry fixed at opening, the gateway that opened it); creating it is the
// one push that answers "new", and a push that finds it answers "yes".
//
// Who closes a window: every gateway watches the bucket and keeps the
// deadlines of all windows in one min-heap served by one goroutine and one
// timer (idle queues cost nothing). At the deadline (other gateways wait a
// little longer) a gateway creates the close job j.<enc>.<id> with expected
// revision 0; the one that succeeds runs it. The job is a small state
// machine (closing → publishing → published → removed), written with
// expected revisions and a lease: if its runner dies (no subscriber on its
// liveness subject) or its lease runs out, another gateway takes it over,
// and a restarted gateway resumes jobs and overdue windows from the watch.
//
// Which parts a window gets: the runner first removes the pointer (from
// then on pushes open a new window at once), then fixes the cut, the
// stream's last sequence, in the job. A part belongs to its window if and
// only if its sequence is ≤ the cut. After storing its part a push reads the
// pointer again (from the stream leader): unchanged means the cut, read
// later, will cover the part; otherwise it reads the cut from the job (or
// fixes it itself if the runner has not yet), and a part past the cut is
// removed and pushed again, into the next window. So no part is lost or
// lands in no window, and none is in two.
//
// How duplicates are prevented: one close job per window (expected revision
// 0), and a compound message is stored only by the job's current owner,
// after it recorded state publishing and the stream's last sequence LQ. The
// compound is built from the tagged parts up to the cut, in stream order
// (push order), each with its own metadata, and carries the window's retry.
// Only after the job says published are the parts removed, then the job. A
// run that finds the job in publishing (a crash, a timeout, a takeover)
// looks for a message tagged with the window after LQ before storing the
// compound again. Nats-Msg-Id is not used for this: the core releases a
// message by re-publishing it with all its headers, and JetStream would
// silently drop that copy as a duplicate within its dedupe window. The one
// case this cannot catch is a compound stored, then delivered and acked
// before the interrupted run is resumed, all between two consecutive
// requests of the runner.
package accumulator
