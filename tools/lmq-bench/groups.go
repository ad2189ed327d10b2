package main

// The "groups" workload (issue 27): what ordered message groups cost. For
// each group count of --groups, on a fresh queue: --groups-msgs messages of
// 256 B pushed by --groups-conc clients (message i in group i mod G; G = 0
// is the same queue without groups), the gateway's RSS before and after
// (per waiting group and per waiting message), then the queue drained by
// the same number of clients doing pull+ack, timed, with the serving
// process's CPU per message. Every delivered body is checked: each message
// comes out, and within a group in push order and never two at once. A
// grouped push costs the gateway more JetStream requests than a plain one,
// and a group hands out one message at a time, so the figures are read
// against the G = 0 row of the same target.
//
// Each phase is bounded by --groups-budget, so a layout that is slow at
// many groups (or a group that stalls) ends the run with how far it got.

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const wGroups = "groups"

// groupPusher is implemented by the clients of the gateway targets, which
// can push into an ordered group (raw JetStream and the no-op handler have
// no groups).
type groupPusher interface {
	pushGroup(ctx context.Context, queue, group string, body []byte) error
}

// groupsResult is one group count on one target.
type groupsResult struct {
	target string
	groups int
	msgs   int // to push

	pushed    int64
	pushTime  time.Duration
	pushCPU   time.Duration
	pushErrs  int64
	pushFirst string

	rssBefore, rssAfter, rssDrained int64
	// peakRSS is the gateway process's VmHWM after the drain: with a fresh
	// process per run, the peak of this run.
	peakRSS int64

	delivered  int64 // distinct messages pulled and acked
	redelivers int64 // deliveries of a message already delivered
	pullTime   time.Duration
	pullCPU    time.Duration
	pullErrs   int64
	pullFirst  string

	// violations: a group's message out of push order, or handed out while
	// another of its group was in flight; firstViolation describes one.
	violations     int64
	firstViolation string
	// budget: the phases that ran out of --groups-budget.
	budget []string

	repRates []float64 // --repeat: the pull+ack rates of all runs
}

func (r groupsResult) pushRate() float64 { return rate(r.pushed, r.pushTime) }
func (r groupsResult) pullRate() float64 { return rate(r.delivered, r.pullTime) }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// waitingGroups is the number of groups that held messages after the push.
func (r groupsResult) waitingGroups() int64 { return min(int64(r.groups), r.pushed) }

// failed says what went wrong in a way the groups implementation must
// answer for (nil when nothing did): order violations and messages that
// never came out although the drain had time left.
func (r groupsResult) failed() error {
	var why []string
	if r.violations > 0 {
		why = append(why, fmt.Sprintf("%d order violations (first: %s)", r.violations, r.firstViolation))
	}
	if r.delivered < r.pushed && !slices.Contains(r.budget, "drain") {
		why = append(why, fmt.Sprintf("%d of %d pushed messages delivered", r.delivered, r.pushed))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s, %d groups: %s", r.target, r.groups, strings.Join(why, "; "))
}

// Body layout of the groups workload (256 B, big endian): the message's
// index, its group, the pushing slot, that slot's sequence within the group
// and the number of the group's pushes that had been answered when this one
// was sent. Slots push one message at a time, so a slot's sequence is an
// order the gateway must keep; the answered count gives the order between
// slots: a message cannot rightly come out before those pushed before it
// was sent.
const (
	gbIndex    = 0
	gbGroup    = 8
	gbSlot     = 12
	gbSeq      = 16
	gbAnswered = 20
	gbLen      = 28
)

// groupsSeries runs the workload on every gateway target, the targets
// taking turns for each group count and repetition, and records the median
// run (by pull+ack rate) of each.
func (b *bench) groupsSeries(ctx context.Context) error {
	cfg := b.cfg
	var ts []target
	for _, t := range b.targets {
		if t.name() == tHTTP || t.name() == tRPC {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		b.notes = append(b.notes, "groups skipped: it needs the http or rpc target")
		return nil
	}
	var failures []string
	for _, g := range cfg.groupCounts {
		runs := make([][]groupsResult, len(ts))
		for rep := range cfg.repeat {
			for i, t := range ts {
				r, err := b.groupsRun(ctx, t, g, rep)
				runs[i] = append(runs[i], r)
				if ferr := r.failed(); ferr != nil {
					b.log.Error("groups check failed", "err", ferr)
					failures = append(failures, ferr.Error())
				}
				if err != nil {
					b.keepGroupMedians(runs)
					return err
				}
			}
		}
		b.keepGroupMedians(runs)
	}
	if len(failures) > 0 {
		return fmt.Errorf("groups: %s", strings.Join(failures, " | "))
	}
	return nil
}

func (b *bench) keepGroupMedians(runs [][]groupsResult) {
	for _, rs := range runs {
		if len(rs) == 0 {
			continue
		}
		sorted := slices.Clone(rs)
		slices.SortStableFunc(sorted, func(x, y groupsResult) int { return cmp.Compare(x.pullRate(), y.pullRate()) })
		m := sorted[(len(sorted)-1)/2]
		if len(rs) > 1 {
			m.repRates = nil
			for _, r := range rs {
				m.repRates = append(m.repRates, r.pullRate())
			}
			// A violation in any run must not hide behind the median.
			for _, r := range rs {
				if r.violations > 0 && m.violations == 0 {
					m.violations, m.firstViolation = r.violations, r.firstViolation+" (another run)"
				}
			}
		}
		b.groups = append(b.groups, m)
	}
}

// groupsRun measures one group count g on target t: push, RSS, drain.
func (b *bench) groupsRun(ctx context.Context, t target, g, rep int) (groupsResult, error) {
	cfg := b.cfg
	r := groupsResult{target: t.name(), groups: g, msgs: cfg.groupsMsgs}
	if b.gw != nil {
		// A fresh process and an empty store for every run: the RSS delta
		// is then this queue's alone, not the reuse of memory an earlier
		// run grew and freed.
		if err := b.restartGateway(ctx); err != nil {
			return r, err
		}
		if ht, ok := t.(*httpTarget); ok {
			ht.hc.CloseIdleConnections() // connections to the old process
		}
	}
	queue := fmt.Sprintf("lmqb-%s-%s-g%d-r%d", b.runID, t.name(), g, rep)
	if err := t.setup(ctx, queue); err != nil {
		return r, fmt.Errorf("groups: creating %s: %w", queue, err)
	}
	// Let the start (or the previous run's garbage) settle, so that the
	// baseline is fair.
	if err := sleepCtx(ctx, cfg.memIdle); err != nil {
		return r, err
	}
	r.rssBefore = b.serverRSS()
	if err := b.groupsPush(ctx, t, queue, &r); err != nil {
		return r, err
	}
	if err := sleepCtx(ctx, cfg.memIdle); err != nil {
		return r, err
	}
	r.rssAfter = b.serverRSS()
	if err := b.groupsDrain(ctx, t, queue, &r); err != nil {
		return r, err
	}
	r.rssDrained = b.serverRSS()
	if b.gw != nil {
		_, r.peakRSS, _ = procRSS(b.gwPID)
	}
	b.log.Info("groups", "target", r.target, "groups", g, "pushed", r.pushed, "push_rate", fmtRate(r.pushRate()),
		"delivered", r.delivered, "pull_rate", fmtRate(r.pullRate()), "rss_before", fmtMiB(r.rssBefore),
		"rss_after", fmtMiB(r.rssAfter), "violations", r.violations, "budget", strings.Join(r.budget, ","))
	// Without a fresh gateway next time, the queue must not linger (with
	// one, its store is emptied anyway).
	if b.gw == nil {
		if err := t.remove(ctx, queue); err != nil {
			b.log.Warn("groups: removing the queue", "queue", queue, "err", err)
		}
	}
	return r, b.cellErr(ctx)
}

// groupName is the name of group k of a run.
func groupName(k int) string { return "g" + strconv.Itoa(k) }

// groupsPush pushes r.msgs messages of 256 B into queue from
// --groups-conc clients (times the target's depth), message i into group i
// mod r.groups, within --groups-budget.
func (b *bench) groupsPush(ctx context.Context, t target, queue string, r *groupsResult) error {
	cfg := b.cfg
	bctx, cancel := context.WithTimeout(ctx, cfg.groupsBudget)
	defer cancel()
	clients, err := b.openClients(bctx, t, cfg.groupsConc)
	if err != nil {
		return err
	}
	defer closeClients(clients)
	if r.groups > 0 {
		for _, c := range clients {
			if _, ok := c.(groupPusher); !ok {
				return fmt.Errorf("groups: target %s cannot push into a group", t.name())
			}
		}
	}
	depth := t.depth()
	var answered []atomic.Int64 // per group: pushes answered so far
	if r.groups > 0 {
		answered = make([]atomic.Int64, r.groups)
	}
	var next, pushed atomic.Int64
	var errs errTally
	cpu0 := b.serverCPU(t)
	start := time.Now()
	slots(clients, depth, func(w, k int, c client) {
		slot := w*depth + k
		gp, _ := c.(groupPusher)
		body := newBody(memMsgSize)
		var seq []uint32 // this slot's sequence per group
		if r.groups > 0 {
			seq = make([]uint32, r.groups)
		}
		for bctx.Err() == nil {
			i := next.Add(1) - 1
			if i >= int64(r.msgs) {
				return
			}
			binary.BigEndian.PutUint64(body[gbIndex:], uint64(i))
			binary.BigEndian.PutUint32(body[gbSlot:], uint32(slot))
			group := -1
			if r.groups > 0 {
				group = int(i % int64(r.groups))
				binary.BigEndian.PutUint32(body[gbGroup:], uint32(group))
				binary.BigEndian.PutUint32(body[gbSeq:], seq[group])
				binary.BigEndian.PutUint64(body[gbAnswered:], uint64(answered[group].Load()))
			}
			// A failed push is sent again as it was (same sequence): the
			// order checks must not see a gap for a message never stored.
			// One that was stored after all comes out twice, counted.
			for bctx.Err() == nil {
				var err error
				if group < 0 {
					err = c.push(bctx, queue, body)
				} else {
					err = gp.pushGroup(bctx, queue, groupName(group), body)
				}
				if err == nil {
					pushed.Add(1)
					if group >= 0 {
						seq[group]++
						answered[group].Add(1)
					}
					break
				}
				if bctx.Err() == nil {
					errs.add(err)
					pauseAfterError(bctx)
				}
			}
		}
	})
	r.pushTime = time.Since(start)
	r.pushCPU = b.serverCPU(t) - cpu0
	r.pushed = pushed.Load()
	r.pushErrs, r.pushFirst = errs.n.Load(), errs.firstString()
	if bctx.Err() != nil && ctx.Err() == nil {
		r.budget = append(r.budget, "push")
	}
	return b.cellErr(ctx)
}

// groupTrack is what the drain knows of one group: whether one of its
// messages is in flight, how many came out, and the last sequence of each
// pushing slot.
type groupTrack struct {
	mu        sync.Mutex
	inFlight  int64 // index of the message in flight, -1 when none
	delivered int64 // distinct messages of the group delivered
	lastIndex int64 // the group's last delivered message
	lastSeq   map[uint32]int64
}

// groupsDrain empties queue with --groups-conc clients doing pull+ack,
// checking each body, until every pushed message was acked or the budget
// ran out.
func (b *bench) groupsDrain(ctx context.Context, t target, queue string, r *groupsResult) error {
	cfg := b.cfg
	bctx, cancel := context.WithTimeout(ctx, cfg.groupsBudget)
	defer cancel()
	// done ends the drain as soon as the last message is acked, cutting
	// short the pulls still waiting, so that they do not count in the time.
	dctx, done := context.WithCancel(bctx)
	defer done()
	clients, err := b.openClients(bctx, t, cfg.groupsConc)
	if err != nil {
		return err
	}
	defer closeClients(clients)

	seen := make([]atomic.Bool, r.msgs)
	tracks := make([]groupTrack, r.groups)
	for i := range tracks {
		tracks[i].inFlight, tracks[i].lastIndex = -1, -1
		tracks[i].lastSeq = map[uint32]int64{}
	}
	var acked, redelivers, violations atomic.Int64
	violate := func(format string, a ...any) {
		// Only the first caller writes; slots' end orders it before the
		// reads below.
		if violations.Add(1) == 1 {
			r.firstViolation = fmt.Sprintf(format, a...)
		}
	}
	var errs errTally
	var endMu sync.Mutex
	var end time.Time
	want := r.pushed
	if want == 0 {
		done()
	}
	cpu0 := b.serverCPU(t)
	start := time.Now()
	slots(clients, t.depth(), func(_, _ int, c client) {
		for dctx.Err() == nil {
			body, ack, err := c.pull(dctx, queue, cfg.groupsPullWait)
			if err != nil {
				if dctx.Err() == nil {
					errs.add(err)
					pauseAfterError(dctx)
				}
				continue
			}
			if ack == nil {
				continue // the wait ran out: pull again
			}
			if len(body) < gbLen {
				violate("a body of %d bytes", len(body))
				_ = ack(dctx)
				continue
			}
			idx := int64(binary.BigEndian.Uint64(body[gbIndex:]))
			if idx < 0 || idx >= int64(len(seen)) {
				violate("message index %d out of range", idx)
				_ = ack(dctx)
				continue
			}
			again := seen[idx].Swap(true)
			if again {
				redelivers.Add(1)
			}
			var tr *groupTrack
			if r.groups > 0 {
				tr = b.checkGroupDelivery(body, idx, again, tracks, violate)
			}
			// The slot gives up the group's turn before acking: the
			// gateway may hand out the group's next message as soon as it
			// has the ack, before the ack's answer is back here.
			if tr != nil {
				tr.mu.Lock()
				if tr.inFlight == idx {
					tr.inFlight = -1
				}
				tr.mu.Unlock()
			}
			if err := ack(dctx); err != nil {
				if dctx.Err() == nil {
					errs.add(err)
				}
				continue
			}
			if !again && acked.Add(1) == want {
				endMu.Lock()
				end = time.Now()
				endMu.Unlock()
				done()
			}
		}
	})
	endMu.Lock()
	if end.IsZero() {
		end = time.Now()
	}
	r.pullTime = end.Sub(start)
	endMu.Unlock()
	r.pullCPU = b.serverCPU(t) - cpu0
	r.delivered, r.redelivers = acked.Load(), redelivers.Load()
	r.violations = violations.Load()
	r.pullErrs, r.pullFirst = errs.n.Load(), errs.firstString()
	if bctx.Err() != nil && ctx.Err() == nil && r.delivered < want {
		r.budget = append(r.budget, "drain")
	}
	return b.cellErr(ctx)
}

// checkGroupDelivery checks one delivery of a grouped message against what
// came out of its group before, and marks it in flight. It returns the
// group's track (nil when the body names no valid group).
func (b *bench) checkGroupDelivery(body []byte, idx int64, again bool, tracks []groupTrack, violate func(string, ...any)) *groupTrack {
	g := int(binary.BigEndian.Uint32(body[gbGroup:]))
	if g >= len(tracks) || int64(g) != idx%int64(len(tracks)) {
		violate("message %d names group %d", idx, g)
		return nil
	}
	slot := binary.BigEndian.Uint32(body[gbSlot:])
	seq := int64(binary.BigEndian.Uint32(body[gbSeq:]))
	answered := int64(binary.BigEndian.Uint64(body[gbAnswered:]))
	tr := &tracks[g]
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.inFlight >= 0 {
		violate("group %d: message %d handed out while message %d was in flight", g, idx, tr.inFlight)
	}
	tr.inFlight = idx
	if again {
		// A redelivery (nack, timeout, failed ack) comes back at the head
		// of its group: it must be the group's last message handed out.
		if idx != tr.lastIndex {
			violate("group %d: message %d delivered again after message %d", g, idx, tr.lastIndex)
		}
		return tr
	}
	last, ok := tr.lastSeq[slot]
	if !ok {
		last = -1
	}
	if seq != last+1 {
		violate("group %d: slot %d's message #%d (index %d) after its #%d", g, slot, seq, idx, last)
	}
	if tr.delivered < answered {
		violate("group %d: message %d out after %d of the group's messages, but %d were stored before it was sent",
			g, idx, tr.delivered, answered)
	}
	tr.lastSeq[slot] = max(last, seq)
	tr.lastIndex = idx
	tr.delivered++
	return tr
}

// ---- report ----

func (b *bench) groupsReport(w func(string, ...any)) {
	if len(b.groups) == 0 {
		return
	}
	cfg := b.cfg
	w("## Ordered groups (issue 27)\n\n")
	w("One fresh queue per row (a freshly restarted gateway when spawned); %s messages of %d B pushed by %d clients (message i in group i mod G; 0 = the same queue without groups), then drained by %d clients doing pull+ack (pull wait %s). RSS: VmRSS of the serving processes (the gateway with its embedded NATS, so the engine's per-subject state is included) %s after the pushes minus %s before, per group with waiting messages and per waiting message. CPU: user+system of the serving processes per message. Each phase bounded by %s.\n\n",
		fmtInt(int64(cfg.groupsMsgs)), memMsgSize, cfg.groupsConc, cfg.groupsConc, cfg.groupsPullWait, cfg.memIdle, cfg.memIdle, cfg.groupsBudget)
	w("| target | groups | push msgs/s | pull+ack msgs/s | pull+ack vs no groups | RSS per waiting group | RSS per waiting message | srv CPU µs/msg push / pull+ack | delivered | order | notes |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	rows := slices.Clone(b.groups)
	slices.SortStableFunc(rows, func(x, y groupsResult) int {
		if d := targetOrder(x.target) - targetOrder(y.target); d != 0 {
			return d
		}
		return x.groups - y.groups
	})
	base := map[string]float64{}
	for _, r := range rows {
		if r.groups == 0 {
			base[r.target] = r.pullRate()
		}
	}
	for _, r := range rows {
		grow := r.rssAfter - r.rssBefore
		perGroup := "—"
		if n := r.waitingGroups(); r.groups > 0 && n > 0 {
			perGroup = fmtBytes(float64(grow) / float64(n))
		}
		perMsg := "—"
		if r.pushed > 0 {
			perMsg = fmtBytes(float64(grow) / float64(r.pushed))
		}
		vs := "—"
		if r.groups > 0 {
			vs = fmtRatio(r.pullRate(), base[r.target])
		}
		order := "—"
		switch {
		case r.violations > 0:
			order = fmt.Sprintf("**%d violations**", r.violations)
		case r.groups > 0:
			order = "kept"
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s of %s | %s | %s |\n",
			r.target, fmtInt(int64(r.groups)), fmtRate(r.pushRate()), fmtRate(r.pullRate()), vs, perGroup, perMsg,
			cpuPerMsg(r.pushCPU, r.pushed), cpuPerMsg(r.pullCPU, r.delivered),
			fmtInt(r.delivered), fmtInt(r.pushed), order, groupsNotes(r))
	}
	w("\n")
}

func groupsNotes(r groupsResult) string {
	n := firstNotes("median of %d runs (pull+ack): %s /s", r.repRates, fmtRate, 1)
	n = append(n, fmt.Sprintf("RSS %s → %s → %s drained", fmtMiB(r.rssBefore), fmtMiB(r.rssAfter), fmtMiB(r.rssDrained)))
	if r.peakRSS > 0 {
		n = append(n, "peak "+fmtMiB(r.peakRSS))
	}
	n = append(n, fmt.Sprintf("push %.1f s, drain %.1f s", r.pushTime.Seconds(), r.pullTime.Seconds()))
	for _, p := range r.budget {
		n = append(n, "**"+p+" budget reached**")
	}
	if r.violations > 0 {
		n = append(n, "first violation: "+mdEscape(r.firstViolation))
	}
	if r.redelivers > 0 {
		n = append(n, fmt.Sprintf("%d delivered again", r.redelivers))
	}
	if r.pushErrs > 0 {
		n = append(n, fmt.Sprintf("%d push errors (retried), first: %s", r.pushErrs, mdEscape(r.pushFirst)))
	}
	if r.pullErrs > 0 {
		n = append(n, fmt.Sprintf("%d pull/ack errors, first: %s", r.pullErrs, mdEscape(r.pullFirst)))
	}
	return strings.Join(n, "; ")
}

// fmtBytes prints a per-item memory figure (which may be negative when the
// process gave memory back meanwhile).
func fmtBytes(v float64) string {
	switch a := max(v, -v); {
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 10<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// parseGroupCounts reads --groups: counts >= 0 (0 = no groups).
func parseGroupCounts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a group count (an integer >= 0)", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}
