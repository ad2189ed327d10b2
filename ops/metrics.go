package ops

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the Prometheus side of a gateway: its own registry (never the
// global one), the request histogram the middleware fills, and the gauges
// other parts of the binary update.
type Metrics struct {
	reg      *prometheus.Registry
	handler  http.Handler
	requests *prometheus.HistogramVec
	rpcConns prometheus.Gauge
	auth     *authMetrics // per-namespace counters (metrics_auth.go)
}

func newMetrics(o *Ops) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lmq_http_request_duration_seconds",
			Help:    "HTTP requests by method, route template and status code; pulls include their wait.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route", "code"}),
		rpcConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lmq_rpc_connections",
			Help: "Open MessagePack-RPC connections.",
		}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
		m.rpcConns,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_long_polls_waiting",
			Help: "Pulls (HTTP, RPC and SQS) waiting for a message on this gateway; --max-waiting-pulls bounds them.",
		}, func() float64 { return float64(o.core.Inspect.WaitingPulls()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_gateway_peers",
			Help: "Other gateways on the same NATS system that this one hears (heartbeats on lmq.gw.hello); while 0 it publishes no wake-up notifications.",
		}, func() float64 { return float64(len(o.core.Gateway.Peers())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_deliveries_in_flight",
			Help: "Messages this gateway handed out and not yet answered.",
		}, func() float64 { return float64(o.core.Inspect.InFlight()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "lmq_store_failures_total",
			Help: "Stores (pushes) that failed for want of storage: a full disk, a JetStream limit.",
		}, func() float64 { return float64(o.core.Gateway.StoreFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_store_failing",
			Help: "1 while JetStream refuses stores for want of storage (its limit reached, a full disk): pushes answer 503, /readyz?verbose says \"store: full\" (/readyz stays 200: pulls, acks, deletions and purges are served), else 0.",
		}, func() float64 {
			if o.core.Gateway.StoreFailure() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_queues",
			Help: "Queues that exist.",
		}, func() float64 { return float64(len(o.core.Queues.QueueNames())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "lmq_build_info",
			Help:        "Always 1; the labels tell the version.",
			ConstLabels: prometheus.Labels{"version": o.opt.Version, "goversion": runtime.Version()},
		}, func() float64 { return 1 }),
		&queueCollector{o: o},
	)
	m.auth = newAuthMetrics(reg, o)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{o},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: false,
	})
	return m
}

// Registry is the gateway's registry, for more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// RPCConnections is the gauge of open MessagePack-RPC connections, for the RPC
// server to update (or use RPCListener, which does it).
func (m *Metrics) RPCConnections() prometheus.Gauge { return m.rpcConns }

// RPCListener wraps the RPC server's listener so that lmq_rpc_connections
// follows the connections it accepts and their closing, without the RPC
// server knowing about metrics.
func (m *Metrics) RPCListener(l net.Listener) net.Listener {
	return &countingListener{Listener: l, g: m.rpcConns}
}

type countingListener struct {
	net.Listener
	g prometheus.Gauge
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.g.Inc()
	return &countingConn{Conn: c, g: l.g}, nil
}

type countingConn struct {
	net.Conn
	g    prometheus.Gauge
	once sync.Once
}

// NetConn returns the accepted connection, so that internal/clientgone (has
// the client closed it?) sees the socket through the wrapper.
func (c *countingConn) NetConn() net.Conn { return c.Conn }

func (c *countingConn) Close() error {
	c.once.Do(c.g.Dec)
	return c.Conn.Close()
}

// slogPrinter adapts promhttp's error log to slog.
type slogPrinter struct{ o *Ops }

func (p slogPrinter) Println(v ...any) { p.o.log.Warn("metrics", "err", v) }

// queueCollector reports the per-queue metrics: this gateway's event counters
// from Stats, and depth and bytes from JetStream (through the shared, cached
// inventory, so a scrape costs at most one collection per StatsTTL).
type queueCollector struct{ o *Ops }

var (
	descPushes    = prometheus.NewDesc("lmq_pushes_total", "Messages pushed through this gateway (parts, on accumulating queues).", []string{"queue"}, nil)
	descPushBytes = prometheus.NewDesc("lmq_push_bytes_total", "Bytes of message bodies pushed through this gateway.", []string{"queue"}, nil)
	descPulls     = prometheus.NewDesc("lmq_pulls_total", "Messages this gateway handed to clients.", []string{"queue"}, nil)
	descAcks      = prometheus.NewDesc("lmq_acks_total", "Deliveries acknowledged (done).", []string{"queue"}, nil)
	descNacks     = prometheus.NewDesc("lmq_nacks_total", "Deliveries given back by the client (release); they are redelivered.", []string{"queue"}, nil)
	descExts      = prometheus.NewDesc("lmq_extends_total", "Delivery timeouts extended by the client (retain).", []string{"queue"}, nil)
	descTimeouts  = prometheus.NewDesc("lmq_timeouts_total", "Deliveries whose timeout expired; the message went back to the queue for redelivery.", []string{"queue"}, nil)
	descDiscarded = prometheus.NewDesc("lmq_discarded_total", "Messages dropped because their retries were used up.", []string{"queue"}, nil)
	descRetention = prometheus.NewDesc("lmq_retention_seconds", "Time from push to pull of the messages this gateway handed out.", []string{"queue"}, nil)
	descDepth     = prometheus.NewDesc("lmq_queue_depth", "Messages in the queue, waiting and in flight (LMQ's size), from JetStream.", []string{"queue"}, nil)
	descBytes     = prometheus.NewDesc("lmq_queue_bytes", "Bytes JetStream stores for the queue (LMQ's memory).", []string{"queue"}, nil)
	descInFlight  = prometheus.NewDesc("lmq_queue_in_flight", "Messages of the queue delivered and not yet answered, on all gateways.", []string{"queue"}, nil)
	// Queue control (beyond LMQ): per queue, like the series above, so
	// bounded by the same inventory (Options.MaxQueues).
	descPaused        = prometheus.NewDesc("lmq_queue_paused", "1 while the queue's paused property holds its messages back from pulls, else 0.", []string{"queue"}, nil)
	descLocalInFlight = prometheus.NewDesc("lmq_queue_deliveries_in_flight", "Messages of the queue this gateway handed out and not yet answered (lmq_queue_in_flight counts all gateways').", []string{"queue"}, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPushes, descPushBytes, descPulls, descAcks, descNacks, descExts, descTimeouts, descDiscarded, descRetention, descDepth, descBytes, descInFlight, descPaused, descLocalInFlight} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.o
	bounds := o.stats.RetentionBuckets()
	o.stats.Each(func(q string, n Counters) {
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), q)
		}
		counter(descPushes, n.Pushes)
		counter(descPushBytes, n.PushBytes)
		counter(descPulls, n.Pulls)
		counter(descAcks, n.Acks)
		counter(descNacks, n.Nacks)
		counter(descExts, n.Exts)
		counter(descTimeouts, n.Timeouts)
		counter(descDiscarded, n.Discarded)
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b] = n.RetentionBuckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(descRetention, n.RetentionCount, n.RetentionSum, buckets, q)
	})
	// Collect has no context: bound the JetStream side here.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	views, err := o.inv.collect(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDepth, err)
		return
	}
	local := o.core.Inspect.InFlightByQueue()
	for _, v := range views {
		ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(v.Size), v.Name)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(v.Bytes), v.Name)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(v.InFlight), v.Name)
		paused := 0.0
		if v.Props.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused, v.Name)
		ch <- prometheus.MustNewConstMetric(descLocalInFlight, prometheus.GaugeValue, float64(local[v.Name]), v.Name)
	}
}
