package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// setupResult is the time to create and delete one queue set.
type setupResult struct {
	target string
	queues int
	create time.Duration
	remove time.Duration
}

// machineFacts describe where the figures were taken.
type machineFacts struct {
	cpuModel  string
	cores     int
	memTotal  string
	kernel    string
	goVersion string
	commit    string
	loadStart string
	loadEnd   string
	started   time.Time
	elapsed   time.Duration
}

func gatherFacts(ctx context.Context) machineFacts {
	f := machineFacts{cores: runtime.NumCPU(), goVersion: runtime.Version()}
	f.cpuModel = procField("/proc/cpuinfo", "model name")
	f.memTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f.kernel = strings.TrimSpace(string(b))
	}
	// The commit is best effort: the bench may run outside a checkout.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		f.commit = strings.TrimSpace(string(out))
	}
	return f
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	fh, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func readLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// shellQuote renders the command line so that it can be pasted back.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// cellKey identifies comparable cells across targets.
type cellKey struct {
	workload string
	conc     int
	size     int
	queues   int
}

// ceilingWhere says where the ceilings ran and why it matters, for the
// explanation of the ratio columns.
func (b *bench) ceilingWhere() string {
	if b.noop != nil {
		return "in a process of its own as the gateway is, since a request crossing to another process pays wake-ups that one within the process does not; the sum of parts is therefore not flattered by an in-process ceiling"
	}
	return "inside the bench (--noop-in-process): client and server are goroutines of one process, which spares the cross-process wake-ups the gateway pays, so these ratios are unfair to the gateway"
}

func (b *bench) report() string {
	var sb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	f := b.facts
	w("# lmq-bench run %s\n\n", f.started.Format("2006-01-02 15:04 MST"))
	w("- command: `go run ./tools/lmq-bench %s`\n", shellQuote(b.cfg.args))
	w("- machine: %s, %d cores, %s RAM, Linux %s, %s\n", f.cpuModel, f.cores, f.memTotal, f.kernel, f.goVersion)
	w("- load average (1/5/15 min): %s at start, %s at end; run took %s\n", f.loadStart, f.loadEnd, f.elapsed.Round(time.Second))
	if f.commit != "" {
		w("- commit: %s\n", f.commit)
	}
	switch {
	case b.gw != nil && len(b.clusterNodes) > 0:
		pids := make([]string, len(b.clusterNodes))
		for i, g := range b.clusterNodes {
			pids[i] = strconv.Itoa(g.pid())
		}
		w("- deployment: replicated cluster (--cluster %d): %d nodes on loopback, the embedded nats-servers of spawned gateways (pids %s, --replicas 3, idle); jetstream's streams and consumers R3 over NATS %s; the gateway under test spawned `%s` (pid %d) with --nats-url (the nodes) --replicas 3, HTTP %s, RPC %s, SQS %s; srv CPU and RSS are the three nodes' processes together, with the gateway under test on its rows; client and servers share the machine\n",
			b.cfg.cluster, len(b.clusterNodes), strings.Join(pids, ", "), redactURL(b.natsURL), b.gw.bin, b.gwPID, orDash(b.httpAddr), orDash(b.rpcAddr), orDash(b.sqsAddr))
	case b.gw != nil:
		w("- deployment: spawned `%s` (pid %d, embedded NATS), HTTP %s, RPC %s, SQS %s, NATS %s; client and server share the machine\n",
			b.gw.bin, b.gwPID, orDash(b.httpAddr), orDash(b.rpcAddr), orDash(b.sqsAddr), redactURL(b.natsURL))
	case !slices.ContainsFunc(b.cfg.targets, servedByGateway):
		w("- deployment: no gateway (no selected target needs one)\n")
	default:
		w("- deployment: running; HTTP %s, RPC %s, SQS %s, NATS %s, gateway pid %d, nats pid %d\n",
			orDash(b.httpAddr), orDash(b.rpcAddr), orDash(b.sqsAddr), orDash(redactURL(b.natsURL)), b.gwPID, b.natsPID)
	}
	if p := b.beanstalkd; p != nil {
		w("- beanstalkd: started by the bench, `%s` (%s, pid %d): binlog on, fsync at most every 50 ms (its default); one connection per client, one request at a time; client and server share the machine\n",
			p.commandLine(), orDash(p.version), p.pid())
	}
	if p := b.noop; p != nil {
		w("- ceilings: noop-http %s and noop-rpc %s in a child process of the bench (pid %d)\n", p.httpAddr, p.rpcAddr, p.pid())
	} else if b.cfg.noopInProcess && slices.ContainsFunc(b.cfg.targets, isCeiling) {
		w("- ceilings: inside the bench (--noop-in-process): optimistic, no cross-process wake-ups\n")
	}
	if n := b.cfg.serverProcs; n > 0 {
		w("- servers' GOMAXPROCS: %d (--server-procs) for the gateway with its embedded NATS and the ceilings' process; the bench itself uses every core\n", n)
	}
	w("- cells: %s each; rpc and noop-rpc depth %d (requests in flight per connection); jetstream clients share %d NATS connection(s)\n",
		b.cfg.duration, b.cfg.rpcDepth, b.cfg.jsConns)
	for _, n := range b.notes {
		w("- **%s**\n", n)
	}
	w("\n")
	b.mqReport(w)
	b.groupsReport(w)

	index := map[cellKey]map[string]cellResult{}
	for _, c := range b.cells {
		k := cellKey{c.workload, c.conc, c.size, c.queues}
		if index[k] == nil {
			index[k] = map[string]cellResult{}
		}
		index[k][c.target] = c
	}
	// ceilingFor finds the cell of ceiling (noop-http, noop-rpc) that
	// compares with c: a ceiling ran with one queue count only; it keeps
	// no queues.
	ceilingFor := func(c cellResult, ceiling string) (cellResult, bool) {
		for k, m := range index {
			if k.workload == c.workload && k.conc == c.conc && k.size == c.size {
				if n, ok := m[ceiling]; ok {
					return n, true
				}
			}
		}
		return cellResult{}, false
	}

	sections := []struct {
		workload, title, latency string
	}{
		{wPush, "Push", "latency of one push (request to answer)"},
		{wPull, "Pull + ack, draining pre-filled queues", "latency of one pull + ack cycle; a cell ends early when its queues are empty"},
		{wMixed, "Push and pull + ack at once (C pushers and C pullers)", "msgs/s counts acked messages; latency is of pull + ack cycles of messages already waiting (push latency in the notes)"},
	}
	for _, s := range sections {
		var rows []cellResult
		for _, c := range b.cells {
			if c.workload == s.workload {
				rows = append(rows, c)
			}
		}
		if len(rows) == 0 {
			continue
		}
		w("## %s\n\n%s. \"srv CPU\" is the CPU time per message of the serving processes (the gateway, with NATS when embedded or given by --nats-pid; beanstalkd for its rows; the ceilings' child process for theirs, none when they run inside the bench); \"srv RSS after\" is their RSS at the end of the cell.\n\n", s.title, capitalize(s.latency))
		w("\"vs noop-http\" and \"vs noop-rpc\" compare http and rpc with their protocol's ceiling (a no-op server driven by the same client code, %s); \"vs parts\" compares them with the sum-of-parts limit 1/(1/ceiling + 1/jetstream): the rate the protocol and JetStream would reach together on this client if the gateway added nothing. \"vs beanstalkd\" compares http and rpc with beanstalkd (binlog on) in the same cell.\n\n", b.ceilingWhere())
		w("| target | C | size | queues | msgs/s | p50 | p99 | p999 | srv CPU µs/msg | srv RSS after | vs jetstream | vs noop-http | vs noop-rpc | vs parts | vs beanstalkd | notes |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		sortCells(rows)
		for _, c := range rows {
			same := index[cellKey{c.workload, c.conc, c.size, c.queues}]
			js := same[tJS]
			vsJS, vsNoopHTTP, vsNoopRPC, vsParts, vsBS := "—", "—", "—", "—", "—"
			if c.target != tJS {
				vsJS = fmtRatio(c.rate, js.rate)
			}
			// A gateway front end against its protocol's ceiling, alone
			// and summed with the engine.
			var ceiling string
			switch c.target {
			case tHTTP:
				ceiling = tNoop
			case tRPC:
				ceiling = tNoopRPC
			}
			if ceiling != "" {
				if n, ok := ceilingFor(c, ceiling); ok {
					vs := fmtRatio(c.rate, n.rate)
					if ceiling == tNoop {
						vsNoopHTTP = vs
					} else {
						vsNoopRPC = vs
					}
					if n.rate > 0 && js.rate > 0 {
						vsParts = fmtRatio(c.rate, 1/(1/n.rate+1/js.rate))
					}
				}
				if bs, ok := same[tBeanstalkd]; ok {
					vsBS = fmtRatio(c.rate, bs.rate)
				}
			}
			rss := "—"
			if c.srvRSS > 0 {
				rss = fmt.Sprintf("%.0f MiB", float64(c.srvRSS)/(1<<20))
			}
			w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				c.target, c.conc, fmtSize(c.size), queuesCol(c.target, c.queues), fmtRate(c.rate),
				fmtDur(c.lat.p50), fmtDur(c.lat.p99), fmtDur(c.lat.p999),
				cpuPerMsg(c.srvCPU, c.msgs), rss, vsJS, vsNoopHTTP, vsNoopRPC, vsParts, vsBS, cellNotes(c))
		}
		w("\n")
	}

	if len(b.e2es) > 0 {
		w("## End-to-end latency at a fixed offered rate (open loop)\n\n")
		w("C pushers send on a fixed schedule, C pullers long-poll; latency = pull time − scheduled push time (warm-up excluded). \"delivered\" = msgs/s pulled within the offered window.\n\n")
		w("| target | C | size | queues | offered/s | delivered/s | p50 | p99 | p999 | p99 vs jetstream | srv CPU µs/msg | notes |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		rows := slices.Clone(b.e2es)
		sortE2E(rows)
		for _, r := range rows {
			vs := "—"
			if r.target != tJS {
				for _, j := range b.e2es {
					if j.target == tJS && j.conc == r.conc && j.size == r.size && j.queues == r.queues && j.offered == r.offered && j.lat.p99 > 0 {
						vs = fmt.Sprintf("%.2f×", float64(r.lat.p99)/float64(j.lat.p99))
					}
				}
			}
			w("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.target, r.conc, fmtSize(r.size), r.queues, fmtRate(r.offered), fmtRate(r.delivered),
				fmtDur(r.lat.p50), fmtDur(r.lat.p99), fmtDur(r.lat.p999), vs, cpuPerMsg(r.srvCPU, r.sent), e2eNotes(r))
		}
		w("\n")
	}

	if len(b.maxRates) > 0 {
		w("## Highest offered rate with p99 ≤ %s\n\n", fmtDur(b.cfg.maxRateP99))
		w("Doubling from %s msgs/s until a trial fails, then %d bisection steps; %s per trial. A trial passes when p99 is within the bound, every accepted message was delivered, at least 95%% of the offered rate was delivered in the window, and nothing failed.\n\n",
			fmtRate(b.cfg.maxRateStart), b.cfg.maxRateSteps, b.cfg.maxRateTrialD)
		w("| target | C | size | highest sustained | vs jetstream | srv CPU µs/msg there | trials (offered: p99, pass) |\n|---|---:|---:|---:|---:|---:|---|\n")
		var jsBest float64
		for _, m := range b.maxRates {
			if m.target == tJS {
				jsBest = m.best
			}
		}
		for _, m := range b.maxRates {
			var tr []string
			cpu := "—"
			for _, t := range m.trials {
				mark := "✗"
				if t.pass {
					mark = "✓"
					if t.offered == m.best {
						cpu = cpuPerMsg(t.srvCPU, t.sent)
					}
				}
				tr = append(tr, fmt.Sprintf("%s: %s %s", fmtRate(t.offered), fmtDur(t.lat.p99), mark))
			}
			vs := "—"
			if m.target != tJS {
				vs = fmtRatio(m.best, jsBest)
			}
			best := fmtRate(m.best) + "/s"
			if m.best == 0 {
				best = "none passed"
			}
			w("| %s | %d | %s | %s | %s | %s | %s |\n", m.target, m.conc, fmtSize(m.size), best, vs, cpu, strings.Join(tr, "; "))
		}
		w("\n")
	}

	if len(b.mems) > 0 {
		w("## Memory with a growing backlog (%s messages of %d B, one queue)\n\n", fmtInt(int64(b.cfg.memMsgs)), memMsgSize)
		w("RSS from /proc/PID/status (VmRSS) of the gateway process")
		if b.gw != nil {
			w(", which embeds NATS: the jetstream rows are the engine alone, the others engine + gateway")
		}
		w(".\n\n")
		w("| target | backlog | gateway RSS | NATS RSS (separate) | moment |\n|---|---:|---:|---:|---|\n")
		for _, m := range b.mems {
			for _, s := range m.samples {
				moment := s.label
				if moment == "" {
					moment = "filling"
				}
				w("| %s | %s | %s | %s | %s |\n", m.target, fmtInt(s.backlog), fmtMiBOrDash(s.rss), fmtMiBOrDash(s.natsRSS), moment)
			}
		}
		w("\n")
		for _, m := range b.mems {
			slope, ok := m.bytesPerMsg()
			w("- %s: filled at %s msgs/s; ", m.target, fmtRate(m.fillRate))
			if ok {
				w("RSS grew %.0f bytes per waiting message between the first and the last sample", slope)
			} else {
				w("too few samples for a slope")
			}
			if m.errors > 0 {
				w("; %d errors (first: %s)", m.errors, m.firstErr)
			}
			w("\n")
		}
		if b.peakRSS > 0 {
			w("- each fill ran on a freshly restarted gateway (same ports, empty data dir); the gateway processes it replaced (earlier workloads and fills) peaked at %s RSS (VmHWM)\n", fmtMiB(b.peakRSS))
		}
		if hwm := b.mems[len(b.mems)-1].hwm; hwm > 0 {
			w("- peak RSS (VmHWM) of the gateway process that ran the last fill: %s\n", fmtMiB(hwm))
		}
		w("\n")
	}

	if len(b.setups) > 0 {
		w("## Queue creation and deletion (setup, untimed in the cells above)\n\n")
		w("| target | queues | create | per queue | delete |\n|---|---:|---:|---:|---:|\n")
		for _, s := range b.setups {
			w("| %s | %s | %s | %s | %s |\n", s.target, fmtInt(int64(s.queues)), fmtDur(s.create),
				fmtDur(s.create/time.Duration(max(s.queues, 1))), fmtDur(s.remove))
		}
		w("\n")
	}
	b.attrs.report(w)
	return sb.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func fmtMiBOrDash(b int64) string {
	if b <= 0 {
		return "—"
	}
	return fmtMiB(b)
}

// isCeiling says whether target is a no-op server (noop-http, noop-rpc).
func isCeiling(target string) bool { return target == tNoop || target == tNoopRPC }

func queuesCol(target string, q int) string {
	if isCeiling(target) {
		return "—"
	}
	return fmtInt(int64(q))
}

func cpuPerMsg(cpu time.Duration, msgs int64) string {
	if cpu <= 0 || msgs <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", float64(cpu.Microseconds())/float64(msgs))
}

// firstNotes starts the notes of a row the same way for every workload:
// the figures of the --repeat runs its median was taken from (median says
// which figure, with a %d for their count and a %s for the list), then a
// pipelining depth above 1.
func firstNotes[T any](median string, reps []T, format func(T) string, depth int) []string {
	var n []string
	if len(reps) > 1 {
		figs := make([]string, len(reps))
		for i, x := range reps {
			figs[i] = format(x)
		}
		n = append(n, fmt.Sprintf(median, len(figs), strings.Join(figs, ", ")))
	}
	if depth > 1 {
		n = append(n, fmt.Sprintf("depth %d", depth))
	}
	return n
}

func cellNotes(c cellResult) string {
	n := firstNotes("median of %d runs: %s /s", c.repRates, fmtRate, c.depth)
	if c.workload == wMixed {
		n = append(n, fmt.Sprintf("pushed %s/s, push p50 %s p99 %s", fmtRate(float64(c.pushed)/c.elapsed.Seconds()),
			fmtDur(c.pushLat.p50), fmtDur(c.pushLat.p99)))
	}
	if c.retried > 0 {
		n = append(n, fmt.Sprintf("%d pulls of a waiting message found none at once", c.retried))
	}
	if c.workload == wPull && c.elapsed > 0 {
		n = append(n, fmt.Sprintf("%s msgs in %.1f s", fmtInt(c.msgs), c.elapsed.Seconds()))
	}
	if c.missing > 0 {
		n = append(n, fmt.Sprintf("%d counted messages not found", c.missing))
	}
	if c.errors > 0 {
		n = append(n, fmt.Sprintf("%d errors, first: %s", c.errors, mdEscape(c.firstErr)))
	}
	return strings.Join(n, "; ")
}

func e2eNotes(r e2eResult) string {
	n := firstNotes("median p99 of %d runs: %s", r.repP99, fmtDur, r.depth)
	if r.undelivered > 0 {
		n = append(n, fmt.Sprintf("%s not delivered within the grace period", fmtInt(r.undelivered)))
	}
	if r.notSent > 0 {
		n = append(n, fmt.Sprintf("%s scheduled pushes dropped (pushers saturated)", fmtInt(r.notSent)))
	}
	if r.errors > 0 {
		n = append(n, fmt.Sprintf("%d errors, first: %s", r.errors, mdEscape(r.firstErr)))
	}
	return strings.Join(n, "; ")
}

func mdEscape(s string) string {
	s = firstLine(s)
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// targetOrder puts the baselines next to the gateway rows they compare with:
// the engine and beanstalkd first, then each protocol's ceiling before its
// front end.
func targetOrder(t string) int {
	switch t {
	case tJS:
		return 0
	case tBeanstalkd:
		return 1
	case tNoop:
		return 2
	case tHTTP:
		return 3
	case tNoopRPC:
		return 4
	case tRPC:
		return 5
	}
	return 6
}

func sortCells(rows []cellResult) {
	less := func(a, b cellResult) int {
		for _, d := range []int{a.size - b.size, a.queues - b.queues, a.conc - b.conc, targetOrder(a.target) - targetOrder(b.target)} {
			if d != 0 {
				return d
			}
		}
		return 0
	}
	slices.SortStableFunc(rows, less)
}

func sortE2E(rows []e2eResult) {
	less := func(a, b e2eResult) int {
		for _, d := range []float64{float64(a.size - b.size), float64(a.queues - b.queues), a.offered - b.offered,
			float64(a.conc - b.conc), float64(targetOrder(a.target) - targetOrder(b.target))} {
			if d < 0 {
				return -1
			}
			if d > 0 {
				return 1
			}
		}
		return 0
	}
	slices.SortStableFunc(rows, less)
}
