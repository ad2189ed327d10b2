// Command lmq-layouts measures candidate JetStream layouts for many LMQ
// queues (issue 13) on the machine it runs on, so the layout can be chosen by
// measurement rather than by guess.
//
// It talks to an embedded nats-server (in-process, loopback only, a fresh
// temporary store directory per run) and never to a gateway: it measures the
// storage layout alone. For every layout and queue count N it puts one
// 256-byte message into each of N queues from 16 goroutines and reports
//
//   - process RSS after creation (VmRSS after runtime.GC and
//     debug.FreeOSMemory, client and server in the same process) and the Go
//     heap in use;
//   - the creation rate in queues per second;
//   - the time to list every queue with its message count;
//   - the restart time: shutdown, then start on the same directory until
//     JetStream answers and every stream and message is back, and RSS after it;
//   - with A queues "in use" (a durable pull consumer each), the consumers'
//     creation rate, RSS, and ack latency p50/p99 of Fetch(1)+DoubleAck from
//     16 goroutines.
//
// Layouts:
//
//	perqueue  today's layout: stream LMQ_<i> with one durable consumer "lmq"
//	          per queue, created with the queue.
//	sharded   S WorkQueue streams LMQ_S<k>; a queue is subject lmq.q.<k>.<name>;
//	          a durable filtered consumer per queue only while it is in use
//	          (InactiveThreshold set).
//	single    one WorkQueue stream, every queue a subject, no per-queue
//	          consumers at rest; the "in use" phase puts all A consumers on the
//	          one stream, which shows what an ack costs with many consumers.
//
// Each (layout, N) runs in a child process of its own so that one run's
// memory does not leak into the next one's RSS, and each child is bounded by
// --budget: creation stops when the budget is spent and the rate reported is
// the one reached so far.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type config struct {
	layout  string
	queues  int
	shards  int
	active  int
	workers int
	budget  time.Duration
}

// result is one (layout, N) run; the child prints it as one JSON line.
type result struct {
	Layout        string  `json:"layout"`
	Queues        int     `json:"queues"`
	Created       int     `json:"created"`
	CreateSec     float64 `json:"create_s"`
	BaseRSSMiB    float64 `json:"base_rss_mib"`
	RSSMiB        float64 `json:"rss_mib"`
	HeapMiB       float64 `json:"heap_mib"`
	ListMs        float64 `json:"list_ms"`
	RestartSec    float64 `json:"restart_s"`
	RestartRSSMiB float64 `json:"restart_rss_mib"`
	MsgsAfter     uint64  `json:"msgs_after"`
	Active        int     `json:"active"`
	ConsPerSec    float64 `json:"cons_per_s"`
	ActiveRSSMiB  float64 `json:"active_rss_mib"`
	AckP50Ms      float64 `json:"ack_p50_ms"`
	AckP99Ms      float64 `json:"ack_p99_ms"`
	AcksPerSec    float64 `json:"acks_per_s"`
	Note          string  `json:"note,omitempty"`
}

func main() {
	queues := flag.String("queues", "10,1000,10000", "comma-separated queue counts")
	layouts := flag.String("layouts", "perqueue,sharded,single", "comma-separated layouts: perqueue, sharded, single")
	shards := flag.Int("shards", 16, "streams in the sharded layout")
	active := flag.Int("active", 1000, "queues put in use (a consumer each) for the ack measurement; capped at N")
	workers := flag.Int("workers", 16, "concurrent creators / ackers")
	budget := flag.Duration("budget", 150*time.Second, "time bound for one (layout, N) creation phase")
	skip := flag.String("skip", "perqueue:10000", "comma-separated layout:N pairs not to run (too slow to bound)")
	one := flag.String("one", "", "internal: run one layout:N in this process and print JSON")
	flag.Parse()

	cfg := config{shards: *shards, active: *active, workers: *workers, budget: *budget}
	if *one != "" {
		l, n, ok := strings.Cut(*one, ":")
		q, err := strconv.Atoi(n)
		if !ok || err != nil {
			fmt.Fprintln(os.Stderr, "bad --one", *one)
			os.Exit(2)
		}
		cfg.layout, cfg.queues = l, q
		res, err := run(context.Background(), cfg)
		if err != nil {
			res.Note = err.Error()
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}

	skipped := strings.Split(*skip, ",")
	var results []result
	for _, l := range strings.Split(*layouts, ",") {
		for _, ns := range strings.Split(*queues, ",") {
			if slices.Contains(skipped, l+":"+ns) {
				continue
			}
			res, err := child(cfg, l, ns)
			if err != nil {
				slog.Error("run failed", "layout", l, "queues", ns, "err", err)
				continue
			}
			results = append(results, res)
			fmt.Fprintf(os.Stderr, "%+v\n", res)
		}
	}
	printTable(cfg, results)
}

// child runs one measurement in a fresh process of this binary.
func child(cfg config, layout, n string) (result, error) {
	exe, err := os.Executable()
	if err != nil {
		return result{}, fmt.Errorf("executable: %w", err)
	}
	cmd := exec.Command(exe, "--one", layout+":"+n, "--shards", strconv.Itoa(cfg.shards),
		"--active", strconv.Itoa(cfg.active), "--workers", strconv.Itoa(cfg.workers), "--budget", cfg.budget.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("child %s:%s: %w", layout, n, err)
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, fmt.Errorf("child output %q: %w", out, err)
	}
	return res, nil
}

func printTable(cfg config, rs []result) {
	fmt.Printf("| layout | queues | created | queues/s | RSS MiB (Δ base) | Go heap MiB | list ms | restart s | RSS after restart | msgs back | active | consumers/s | RSS active MiB | ack p50 ms | ack p99 ms | acks/s | note |\n")
	fmt.Printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		name := r.Layout
		if name == "sharded" {
			name = fmt.Sprintf("sharded S=%d", cfg.shards)
		}
		rate := 0.0
		if r.CreateSec > 0 {
			rate = float64(r.Created) / r.CreateSec
		}
		fmt.Printf("| %s | %d | %d | %.0f | %.0f (+%.0f) | %.0f | %.0f | %.2f | %.0f | %d | %d | %.0f | %.0f | %.2f | %.2f | %.0f | %s |\n",
			name, r.Queues, r.Created, rate, r.RSSMiB, r.RSSMiB-r.BaseRSSMiB, r.HeapMiB, r.ListMs, r.RestartSec,
			r.RestartRSSMiB, r.MsgsAfter, r.Active, r.ConsPerSec, r.ActiveRSSMiB, r.AckP50Ms, r.AckP99Ms, r.AcksPerSec, r.Note)
	}
}

// rssMiB returns VmRSS after returning freed Go memory to the OS, so the
// figure is what the process really holds.
func rssMiB() (rss, heap float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapInuse) / (1 << 20)
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, heap
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024, heap
		}
	}
	return 0, heap
}

func startServer(dir string) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir, ServerName: "lmq-layouts",
		// The single layout puts 1,000 consumers on one stream; the
		// server's default cap is exactly 1,000 per stream.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
	})
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		s.Shutdown()
		return nil, errors.New("server not ready")
	}
	return s, nil
}

func shardOf(q, shards int) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "q%d", q)
	return int(h.Sum32() % uint32(shards))
}

// queueSubject is where queue q's messages live in the shared layouts.
func queueSubject(cfg config, q int) string {
	if cfg.layout == "sharded" {
		return fmt.Sprintf("lmq.q.%d.q%d", shardOf(q, cfg.shards), q)
	}
	return fmt.Sprintf("lmq.q.q%d", q)
}

func queueStream(cfg config, q int) string {
	switch cfg.layout {
	case "perqueue":
		return fmt.Sprintf("LMQ_q%d", q)
	case "sharded":
		return fmt.Sprintf("LMQ_S%d", shardOf(q, cfg.shards))
	}
	return "LMQ"
}

func wq(name string, subjects ...string) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: subjects, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}
}

func run(ctx context.Context, cfg config) (result, error) {
	res := result{Layout: cfg.layout, Queues: cfg.queues}
	res.BaseRSSMiB, _ = rssMiB()
	dir, err := os.MkdirTemp("", "lmq-layouts-")
	if err != nil {
		return res, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	s, err := startServer(dir)
	if err != nil {
		return res, err
	}
	defer func() { s.Shutdown() }()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer func() { nc.Close() }()
	js, err := jetstream.New(nc)
	if err != nil {
		return res, fmt.Errorf("jetstream: %w", err)
	}
	body := make([]byte, 256)
	streams := 1
	start := time.Now()
	switch cfg.layout {
	case "sharded":
		streams = cfg.shards
		for k := range cfg.shards {
			if _, err := js.CreateStream(ctx, wq(fmt.Sprintf("LMQ_S%d", k), fmt.Sprintf("lmq.q.%d.>", k))); err != nil {
				return res, fmt.Errorf("create shard: %w", err)
			}
		}
	case "single":
		if _, err := js.CreateStream(ctx, wq("LMQ", "lmq.q.>")); err != nil {
			return res, fmt.Errorf("create stream: %w", err)
		}
	case "perqueue":
		streams = cfg.queues
	default:
		return res, fmt.Errorf("unknown layout %q", cfg.layout)
	}

	// Creation: one queue = (stream + consumer, for perqueue) + first push.
	cctx, cancel := context.WithTimeout(ctx, cfg.budget)
	var created atomic.Int64
	firstErr := eachQueue(cfg.workers, cfg.queues, func(q int) error {
		if cctx.Err() != nil {
			return nil // budget hit: the rest are not created
		}
		switch err := createQueue(cctx, js, cfg, q, body); {
		case err == nil:
			created.Add(1)
		case cctx.Err() == nil:
			return err
		}
		return nil // failed as the budget ran out: not counted
	})
	budgetHit := cctx.Err() != nil
	cancel()
	res.CreateSec = time.Since(start).Seconds()
	res.Created = int(created.Load())
	if firstErr != nil {
		return res, firstErr
	}
	if budgetHit {
		res.Note = fmt.Sprintf("budget %s hit", cfg.budget)
	}
	if cfg.layout == "perqueue" {
		streams = res.Created
	}
	res.RSSMiB, res.HeapMiB = rssMiB()

	// Listing: every stream with its state, and for the shared layouts the
	// per-subject counts (what GET /queues and /stats would need).
	start = time.Now()
	if _, err := listAll(ctx, js, cfg.layout != "perqueue"); err != nil {
		return res, err
	}
	res.ListMs = float64(time.Since(start).Microseconds()) / 1000

	// Restart on the same directory.
	nc.Close()
	start = time.Now()
	s.Shutdown()
	s.WaitForShutdown()
	s, err = startServer(dir)
	if err != nil {
		return res, fmt.Errorf("restart: %w", err)
	}
	nc, err = nats.Connect(s.ClientURL())
	if err != nil {
		return res, fmt.Errorf("reconnect: %w", err)
	}
	js, err = jetstream.New(nc)
	if err != nil {
		return res, fmt.Errorf("jetstream: %w", err)
	}
	for {
		ai, err := js.AccountInfo(ctx)
		if err == nil && ai.Streams >= streams {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return res, fmt.Errorf("restart: streams not back: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling JetStream readiness, nothing to wait on
	}
	res.RestartSec = time.Since(start).Seconds()
	if res.MsgsAfter, err = listAll(ctx, js, false); err != nil {
		return res, err
	}
	res.RestartRSSMiB, _ = rssMiB()

	return res, activePhase(ctx, js, cfg, &res)
}

func createQueue(ctx context.Context, js jetstream.JetStream, cfg config, q int, body []byte) error {
	subj := queueSubject(cfg, q)
	if cfg.layout == "perqueue" {
		subj = fmt.Sprintf("lmq.q.q%d", q)
		name := queueStream(cfg, q)
		if _, err := js.CreateStream(ctx, wq(name, subj)); err != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{
			Durable: "lmq", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		}); err != nil {
			return fmt.Errorf("create consumer %s: %w", name, err)
		}
	}
	if _, err := js.Publish(ctx, subj, body); err != nil {
		return fmt.Errorf("publish %s: %w", subj, err)
	}
	return nil
}

// listAll walks every stream's state and returns the total message count.
func listAll(ctx context.Context, js jetstream.JetStream, subjects bool) (uint64, error) {
	var total uint64
	lister := js.ListStreams(ctx)
	for info := range lister.Info() {
		total += info.State.Msgs
		if subjects {
			st, err := js.Stream(ctx, info.Config.Name)
			if err != nil {
				return 0, fmt.Errorf("stream %s: %w", info.Config.Name, err)
			}
			if _, err := st.Info(ctx, jetstream.WithSubjectFilter(">")); err != nil {
				return 0, fmt.Errorf("subjects of %s: %w", info.Config.Name, err)
			}
		}
	}
	if err := lister.Err(); err != nil {
		return 0, fmt.Errorf("list streams: %w", err)
	}
	return total, nil
}

// eachQueue calls fn for queues 0 to n-1 from workers goroutines and
// returns the first error; after one, no worker takes a new queue.
func eachQueue(workers, n int, fn func(q int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				q := int(next.Add(1)) - 1
				if q >= n {
					return
				}
				if err := fn(q); err != nil {
					once.Do(func() { first = err; failed.Store(true) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// activePhase puts A queues in use and measures Fetch(1)+DoubleAck.
func activePhase(ctx context.Context, js jetstream.JetStream, cfg config, res *result) error {
	a := min(cfg.active, res.Created)
	res.Active = a
	cons := make([]jetstream.Consumer, a)
	start := time.Now()
	err := eachQueue(cfg.workers, a, func(q int) error {
		var c jetstream.Consumer
		var err error
		if cfg.layout == "perqueue" {
			c, err = js.Consumer(ctx, queueStream(cfg, q), "lmq")
		} else {
			c, err = js.CreateOrUpdateConsumer(ctx, queueStream(cfg, q), jetstream.ConsumerConfig{
				Durable: fmt.Sprintf("q%d", q), FilterSubject: queueSubject(cfg, q),
				AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
				InactiveThreshold: 5 * time.Minute,
			})
		}
		if err != nil {
			return fmt.Errorf("consumer for q%d: %w", q, err)
		}
		cons[q] = c
		return nil
	})
	if err != nil {
		return err
	}
	if cfg.layout != "perqueue" {
		res.ConsPerSec = float64(a) / time.Since(start).Seconds()
	}
	res.ActiveRSSMiB, _ = rssMiB()

	lat := make([]time.Duration, a)
	start = time.Now()
	err = eachQueue(cfg.workers, a, func(q int) error {
		b, err := cons[q].Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("fetch q%d: %w", q, err)
		}
		for m := range b.Messages() {
			t := time.Now()
			if err := m.DoubleAck(ctx); err != nil {
				return fmt.Errorf("ack q%d: %w", q, err)
			}
			lat[q] = time.Since(t)
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	if a > 0 {
		res.AcksPerSec = float64(a) / elapsed.Seconds()
		slices.Sort(lat)
		res.AckP50Ms = float64(lat[a/2].Microseconds()) / 1000
		res.AckP99Ms = float64(lat[(a*99)/100].Microseconds()) / 1000
	}
	return nil
}
