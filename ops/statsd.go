package ops

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// StatsD sends LMQ's StatsD metrics over UDP: per queue the counters
// lmq.<queue>.push and lmq.<queue>.pull, the timing lmq.<queue>.retention
// (milliseconds, sampled when there were many pulls) and the gauges
// lmq.<queue>.size and lmq.<queue>.memory. LMQ sent an event per push and
// pull; this batches them once per interval, which a StatsD server adds up
// the same way.
//
// A StatsD is a lifecycle.Service: Start dials, sends every interval until
// Stop, and Stop sends once more (the events of the last interval).
type StatsD struct {
	o        *Ops
	addr     string
	interval time.Duration
	prefix   string

	cancel context.CancelFunc // set by Start: ends the sender
	done   chan struct{}      // closed when the sender returned
}

// maxPacket keeps a datagram within a typical Ethernet MTU.
const maxPacket = 1432

// NewStatsD returns a StatsD sender to addr (host:port) every interval.
func (o *Ops) NewStatsD(addr string, interval time.Duration) *StatsD {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	return &StatsD{o: o, addr: addr, interval: interval, prefix: "lmq."}
}

// Start dials addr and sends every interval on a goroutine of its own
// until Stop (lifecycle.Service).
func (s *StatsD) Start(context.Context) error {
	conn, err := net.Dial("udp", s.addr)
	if err != nil {
		return fmt.Errorf("statsd: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		defer conn.Close()
		s.run(ctx, conn)
	}()
	return nil
}

// Stop sends the events of the last interval (within finalFlush) and
// returns when the sender ended; nothing to do when Start failed.
func (s *StatsD) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

// finalFlush bounds Stop's last flush.
const finalFlush = 5 * time.Second

// run sends every interval until ctx ends, then sends once more.
func (s *StatsD) run(ctx context.Context, conn net.Conn) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlush)
			s.Flush(fctx, conn)
			cancel()
			return
		case <-t.C:
			s.Flush(ctx, conn)
		}
	}
}

// Flush sends the events since the previous flush and the queues' current
// sizes to w, one datagram per Write.
func (s *StatsD) Flush(ctx context.Context, w interface{ Write([]byte) (int, error) }) {
	var lines []string
	s.o.stats.takeStatsd(func(queue string, d statsdDelta) {
		name := s.prefix + statsdName(queue)
		if d.pushes > 0 {
			lines = append(lines, name+".push:"+strconv.FormatUint(d.pushes, 10)+"|c")
		}
		if d.pulls > 0 {
			lines = append(lines, name+".pull:"+strconv.FormatUint(d.pulls, 10)+"|c")
		}
		rate := ""
		if d.rate < 1 {
			rate = "|@" + strconv.FormatFloat(d.rate, 'g', 4, 64)
		}
		for _, sec := range d.retention {
			lines = append(lines, name+".retention:"+strconv.FormatFloat(sec*1000, 'f', 3, 64)+"|ms"+rate)
		}
	})
	if views, err := s.o.inv.collect(ctx); err == nil {
		for _, v := range views {
			name := s.prefix + statsdName(v.Name)
			lines = append(lines,
				name+".size:"+strconv.FormatUint(v.Size, 10)+"|g",
				name+".memory:"+strconv.FormatUint(v.Bytes, 10)+"|g")
		}
	} else {
		s.o.log.Debug("statsd: queue sizes", "err", err)
	}
	var pkt bytes.Buffer
	send := func() {
		if pkt.Len() == 0 {
			return
		}
		// UDP: a lost or refused datagram is not worth more than a log line.
		if _, err := w.Write(pkt.Bytes()); err != nil {
			s.o.log.Debug("statsd: send", "err", err)
		}
		pkt.Reset()
	}
	for _, l := range lines {
		if pkt.Len() > 0 && pkt.Len()+1+len(l) > maxPacket {
			send()
		}
		if pkt.Len() > 0 {
			pkt.WriteByte('\n')
		}
		pkt.WriteString(l)
	}
	send()
}

// statsdName makes a queue name safe in a StatsD line, whose syntax uses
// ':', '|', '@' and newlines; dots stay, as LMQ kept them.
func statsdName(q string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ':' || r == '|' || r == '@' || r == '#' || r == ' ' || r < 0x20 || r == 0x7f:
			return '_'
		}
		return r
	}, q)
}
