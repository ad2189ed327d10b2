package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// e2eResult is one open-loop trial: messages offered at a fixed rate, and
// the time from each message's scheduled push to its pull.
type e2eResult struct {
	target  string
	conc    int
	depth   int
	size    int
	queues  int
	offered float64 // msgs/s asked for

	sent        int64   // pushes the server accepted
	delivered   float64 // msgs/s pulled within the offered window
	undelivered int64   // accepted but not pulled by the end of the grace period
	notSent     int64   // scheduled pushes the pushers were too busy to take
	lat         percentiles
	srvCPU      time.Duration
	errors      int64
	firstErr    string
	pass        bool            // maxrate: within the p99 bound and keeping up
	repP99      []time.Duration // --repeat: the p99 of all repetitions
}

// e2eSeries runs the e2e trials on nq queues per target, targets taking
// turns trial by trial (see matrix).
func (b *bench) e2eSeries(ctx context.Context, nq int) error {
	var ts []target
	var sets []*queueSet
	for _, t := range b.targets {
		if !t.stateful() {
			continue // the ceiling hands out bodies without timestamps
		}
		qs, err := b.createQueues(ctx, t, fmt.Sprintf("e%d", nq), nq)
		if err != nil {
			return err
		}
		defer b.removeQueues(ctx, t, qs)
		ts, sets = append(ts, t), append(sets, qs)
	}
	for _, size := range b.cfg.sizes {
		for _, c := range b.cfg.conc {
			for _, rate := range b.cfg.e2eRates {
				runs := make([][]e2eResult, len(ts))
				for range b.cfg.repeat {
					for i, t := range ts {
						r, err := b.e2eTrial(ctx, t, sets[i], c, size, rate, b.cfg.duration)
						if err != nil {
							return err
						}
						b.logE2E("e2e", r)
						runs[i] = append(runs[i], r)
						if err := b.drain(ctx, t, sets[i]); err != nil {
							return err
						}
					}
				}
				for _, rs := range runs {
					b.e2es = append(b.e2es, medianE2E(rs))
				}
			}
		}
	}
	return nil
}

// medianE2E is the repetition with the median p99.
func medianE2E(rs []e2eResult) e2eResult {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(x, y e2eResult) int { return cmp.Compare(x.lat.p99, y.lat.p99) })
	m := rs[(len(rs)-1)/2]
	if len(rs) > 1 {
		for _, r := range rs {
			m.repP99 = append(m.repP99, r.lat.p99)
		}
	}
	return m
}

func (b *bench) logE2E(what string, r e2eResult) {
	b.log.Info(what, "target", r.target, "C", r.conc, "size", r.size, "queues", r.queues,
		"offered", fmtRate(r.offered), "delivered", fmtRate(r.delivered),
		"p50", fmtDur(r.lat.p50), "p99", fmtDur(r.lat.p99), "p999", fmtDur(r.lat.p999),
		"undelivered", r.undelivered, "not_sent", r.notSent, "errors", r.errors)
}

// e2eTrial offers rate msgs/s for d (open loop: a pacer schedules pushes
// whatever the answers), with conc pushing and conc pulling clients.
// Latency runs from a message's scheduled push time, not from when a pusher
// got to it, so that a slow push is charged to the system and not hidden
// (no coordinated omission). The first tenth (at most 1 s) is warm-up.
func (b *bench) e2eTrial(ctx context.Context, t target, qs *queueSet, conc, size int, rate float64, d time.Duration) (e2eResult, error) {
	r := e2eResult{target: t.name(), conc: conc, depth: t.depth(), size: size, queues: len(qs.names), offered: rate}
	grace := b.cfg.e2eGrace
	ctx, cancel := context.WithTimeout(ctx, b.cellLimit(d+grace))
	defer cancel()
	pushers, err := b.openClients(ctx, t, conc)
	if err != nil {
		return r, err
	}
	defer closeClients(pushers)
	pullers, err := b.openClients(ctx, t, conc)
	if err != nil {
		return r, err
	}
	defer closeClients(pullers)

	depth := t.depth()
	// One second of schedule can wait for a pusher; beyond that the client
	// side is saturated and the trial says so (notSent).
	schedule := make(chan time.Time, max(1024, int(rate)))
	var sent, pulled, inWindow, acked, notSent atomic.Int64
	var pushersDone atomic.Bool
	var errs errTally
	var recs []*recorder

	cpu0 := b.serverCPU(t)
	profiled := b.profileFor(ctx, t.name(), fmt.Sprintf("e2e-%s-c%d-s%d-q%d-r%.0f", t.name(), conc, size, len(qs.names), rate), d)
	defer profiled()
	start := time.Now()
	end := start.Add(d)
	warm := start.Add(min(d/10, time.Second))
	hardStop := end.Add(grace)

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // pacer
		defer wg.Done()
		defer close(schedule)
		interval := float64(time.Second) / rate
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for i := int64(0); ctx.Err() == nil; i++ {
			at := start.Add(time.Duration(math.Round(float64(i) * interval)))
			if !at.Before(end) {
				return
			}
			// Sleep only when ahead; when behind (timer slack), catch up
			// without sleeping, so the offered rate holds on average.
			if wait := time.Until(at); wait > 50*time.Microsecond {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			select {
			case schedule <- at:
			default:
				notSent.Add(1)
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer pushersDone.Store(true)
		slots(pushers, depth, func(w, k int, c client) {
			own := qs.assigned(w, conc)
			body := newBody(size)
			i := k
			for at := range schedule {
				q := own[i%len(own)]
				i++
				stamp(body, b.epoch, at)
				if err := c.push(ctx, qs.names[q], body); err != nil {
					errs.add(err)
					continue
				}
				qs.remaining[q].Add(1)
				sent.Add(1)
			}
		})
	}()
	go func() {
		defer wg.Done()
		stop := func() bool {
			if time.Now().After(hardStop) {
				return true
			}
			return pushersDone.Load() && pulled.Load() >= sent.Load()
		}
		recs = recordedSlots(pullers, depth, func(w, k int, c client, rec *recorder) {
			onMsg := func(body []byte, at time.Time) {
				pulled.Add(1)
				if at.Before(end) {
					inWindow.Add(1)
				}
				ts, ok := stampedAt(body, b.epoch)
				if ok && !ts.Before(warm) && ts.Before(end) {
					rec.add(at.Sub(ts))
				}
			}
			b.puller(ctx, c, qs, qs.assigned(w, conc), k, stop, hardStop, onMsg, nil, &acked, &errs)
		})
	}()
	wg.Wait()

	r.sent = sent.Load()
	r.delivered = float64(inWindow.Load()) / d.Seconds()
	r.undelivered = max(r.sent-pulled.Load(), 0)
	r.notSent = notSent.Load()
	r.lat = merge(recs)
	r.srvCPU = b.serverCPU(t) - cpu0
	r.errors = errs.n.Load()
	r.firstErr = errs.firstString()
	return r, b.cellErr(ctx)
}

// maxRateResult is the search for the highest offered rate a target
// sustains within the p99 bound.
type maxRateResult struct {
	target string
	conc   int
	size   int
	trials []e2eResult
	best   float64 // highest passing offered rate; 0 when none passed
}

// maxRate doubles the offered rate from --maxrate-start until a trial fails,
// then bisects between the last pass and the first failure. A trial passes
// when p99 <= bound, every accepted message was delivered, the delivered
// rate is within 5% of the offered one, and nothing failed.
func (b *bench) maxRate(ctx context.Context, t target) error {
	cfg := b.cfg
	qs, err := b.createQueues(ctx, t, "m", 1)
	if err != nil {
		return err
	}
	defer b.removeQueues(ctx, t, qs)
	res := maxRateResult{target: t.name(), conc: cfg.maxRateConc, size: cfg.maxRateSize}
	defer func() { b.maxRates = append(b.maxRates, res) }()

	trial := func(rate float64) (bool, error) {
		r, err := b.e2eTrial(ctx, t, qs, cfg.maxRateConc, cfg.maxRateSize, rate, cfg.maxRateTrialD)
		if err != nil {
			return false, err
		}
		r.pass = r.lat.n > 0 && r.lat.p99 <= cfg.maxRateP99 && r.undelivered == 0 && r.notSent == 0 &&
			r.errors == 0 && r.delivered >= 0.95*rate
		res.trials = append(res.trials, r)
		b.logE2E("maxrate trial", r)
		if err := b.drain(ctx, t, qs); err != nil {
			return false, err
		}
		return r.pass, nil
	}

	var lo, hi float64 // last pass, first failure
	for rate := cfg.maxRateStart; rate <= cfg.maxRateMax; rate *= 2 {
		ok, err := trial(rate)
		if err != nil {
			return err
		}
		if !ok {
			hi = rate
			break
		}
		lo = rate
	}
	if hi == 0 { // passed up to the maximum tried
		res.best = lo
		return nil
	}
	if lo == 0 {
		// The first rate failed already: halve until one passes.
		rate := hi
		for range cfg.maxRateSteps {
			rate /= 2
			ok, err := trial(rate)
			if err != nil {
				return err
			}
			if ok {
				lo = rate
				break
			}
			hi = rate
		}
		if lo == 0 {
			return nil
		}
	}
	for range cfg.maxRateSteps {
		mid := math.Round((lo+hi)/2/100) * 100 // round rates read better
		if mid <= lo || mid >= hi {
			break
		}
		ok, err := trial(mid)
		if err != nil {
			return err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.best = lo
	return nil
}
