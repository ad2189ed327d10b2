package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// memSample is the RSS of the serving processes at one backlog.
type memSample struct {
	label   string
	backlog int64
	rss     int64 // gateway process (NATS included when embedded)
	natsRSS int64 // separate nats-server, 0 when none
}

// memResult is one backlog fill: messages of 256 B pushed into one queue and
// left there, with RSS sampled as the backlog grows.
type memResult struct {
	target   string
	samples  []memSample
	fillRate float64
	hwm      int64
	errors   int64
	firstErr string
}

// bytesPerMsg is the RSS growth per message between the first sample with a
// backlog and the full backlog: ~0 means flat.
func (m memResult) bytesPerMsg() (float64, bool) {
	var first, last *memSample
	for i := range m.samples {
		s := &m.samples[i]
		if s.label != "" {
			continue // baseline and after-delete are not part of the slope
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil || last == first || last.backlog == first.backlog {
		return 0, false
	}
	grow := float64(last.rss+last.natsRSS) - float64(first.rss+first.natsRSS)
	return grow / float64(last.backlog-first.backlog), true
}

const memMsgSize = 256

// memory fills a backlog on the raw jetstream target and on one gateway front
// end (HTTP if selected, as it stores the bytes as given; else RPC).
func (b *bench) memory(ctx context.Context) error {
	if b.gwPID <= 0 && b.natsPID <= 0 {
		b.notes = append(b.notes, "memory skipped: no process to measure (spawn, or give --gateway-pid/--nats-pid)")
		return nil
	}
	var picked []target
	var front target
	for _, t := range b.targets {
		switch t.name() {
		case tJS:
			picked = append(picked, t)
		case tHTTP:
			front = t
		case tRPC:
			if front == nil {
				front = t
			}
		}
	}
	if front != nil {
		picked = append(picked, front)
	}
	for _, t := range picked {
		if b.gw != nil {
			if err := b.freshGateway(ctx); err != nil {
				return err
			}
		}
		r, err := b.memFill(ctx, t)
		b.mems = append(b.mems, r)
		if err != nil {
			return err
		}
	}
	return nil
}

// freshGateway restarts the spawned gateway (same ports, empty data), so
// that a backlog fill starts from a process the earlier workloads have not
// grown. The peak RSS of the process it replaces is kept for the report.
func (b *bench) freshGateway(ctx context.Context) error {
	if _, hwm, err := procRSS(b.gwPID); err == nil && hwm > b.peakRSS {
		b.peakRSS = hwm
	}
	return b.restartGateway(ctx)
}

// restartGateway restarts the spawned gateway on the same ports with an
// empty data dir and waits until the jetstream targets are connected again.
func (b *bench) restartGateway(ctx context.Context) error {
	b.log.Info("restarting the gateway for a fresh process")
	if err := b.gw.restart(ctx); err != nil {
		return err
	}
	b.gwPID = b.gw.pid()
	for _, t := range b.targets {
		if jt, ok := t.(*jsTarget); ok {
			if err := jt.waitConnected(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) sampleMem(label string, backlog int64) memSample {
	s := memSample{label: label, backlog: backlog}
	if b.gwPID > 0 {
		s.rss, _, _ = procRSS(b.gwPID)
	}
	if b.natsPID > 0 && b.natsPID != b.gwPID {
		s.natsRSS, _, _ = procRSS(b.natsPID)
	}
	return s
}

func (b *bench) memFill(ctx context.Context, t target) (memResult, error) {
	cfg := b.cfg
	r := memResult{target: t.name()}
	qs, err := b.createQueues(ctx, t, "mem", 1)
	if err != nil {
		return r, err
	}
	clients, err := b.openClients(ctx, t, cfg.memConc)
	if err != nil {
		return r, err
	}
	defer closeClients(clients)
	// Let the previous workloads' garbage settle, so the baseline is fair.
	if err := sleepCtx(ctx, cfg.memIdle); err != nil {
		return r, err
	}
	r.samples = append(r.samples, b.sampleMem("before", 0))

	total := int64(cfg.memMsgs)
	every := max(total/int64(cfg.memSamples), 1)
	var claimed, stored atomic.Int64
	var errs errTally
	stopSampler := make(chan struct{})
	samplerDone := make(chan []memSample)
	go func() {
		var out []memSample
		next := every
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampler:
				samplerDone <- out
				return
			case <-tick.C:
				if n := stored.Load(); n >= next && n < total {
					out = append(out, b.sampleMem("", n))
					next = (n/every + 1) * every
				}
			}
		}
	}()
	start := time.Now()
	body := newBody(memMsgSize)
	slots(clients, t.depth(), func(_, _ int, c client) {
		for ctx.Err() == nil {
			if claimed.Add(1) > total {
				return
			}
			if err := c.push(ctx, qs.names[0], body); err != nil {
				claimed.Add(-1)
				errs.add(err)
				pauseAfterError(ctx)
				continue
			}
			stored.Add(1)
		}
	})
	elapsed := time.Since(start)
	close(stopSampler)
	r.samples = append(r.samples, <-samplerDone...)
	r.samples = append(r.samples, b.sampleMem("", stored.Load()))
	r.fillRate = float64(stored.Load()) / elapsed.Seconds()
	r.errors = errs.n.Load()
	r.firstErr = errs.firstString()
	b.log.Info("backlog filled", "target", t.name(), "msgs", stored.Load(), "took", elapsed.Round(time.Millisecond))

	// Idle a little: a server that caches recent writes should give back.
	if err := sleepCtx(ctx, cfg.memIdle); err != nil {
		return r, err
	}
	r.samples = append(r.samples, b.sampleMem(fmt.Sprintf("full, after %s idle", cfg.memIdle), stored.Load()))
	b.removeQueues(ctx, t, qs)
	if err := sleepCtx(ctx, cfg.memIdle); err != nil {
		return r, err
	}
	r.samples = append(r.samples, b.sampleMem(fmt.Sprintf("queue deleted, after %s", cfg.memIdle), 0))
	if b.gwPID > 0 {
		_, r.hwm, _ = procRSS(b.gwPID)
	}
	r.samples = slices.Clip(r.samples)
	return r, b.cellErr(ctx)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
