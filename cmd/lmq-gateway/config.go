package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// config is every setting of the serve command.
type config struct {
	configFile string

	httpListen    string
	rpcListen     string
	rpcDialect    string
	rpcMaxFrame   int
	sqs           sqsFlags // the SQS API (sqsflags.go)
	dataDir       string
	natsURL       string
	natsWait      time.Duration
	natsListen    string
	replicas      int
	consumerStore string // --consumer-storage: memory or file
	maxBody       int64
	maxBuffered   int64
	maxHeaderLen  int
	maxPayload    int
	maxStore      storeSize // --max-store (storeflag.go)
	syncAlways    bool
	serverName    string
	clusterName   string
	clusterListen string
	routes        string
	nats          natsconn.Options // --nats-* settings of --nats-url (natsflags.go)
	natsAuth      natsListenAuth   // --nats-listen-* authentication (natsflags.go)

	logLevel  string
	logFormat string
	accessLog bool

	tlsCert   string
	tlsKey    string
	authToken string
	authBasic string
	tokens    bool // token authentication (--tokens)
	// allowedOrigins: comma-separated browser origins trusted besides the
	// gateway's own (--allowed-origins).
	allowedOrigins string

	maxWaitingPulls   int
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration

	statsdAddr     string
	statsdInterval time.Duration

	debugListen string // pprof listener ("": off)
	portsFile   string // where the bound addresses are written ("": nowhere)
	ui          bool   // the web console at /ui/

	limits limits // connection, time and memory bounds; RPC protection (limits.go)
}

// envName is the environment variable of a flag: --http-listen is
// LMQ_HTTP_LISTEN.
func envName(flagName string) string {
	return "LMQ_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet defines the serve command's flags on c, with their defaults.
func newFlagSet(c *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lmq-gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.configFile, "config", "", "read settings from `FILE`: lines of name = value, with the flags' names")

	fs.StringVar(&c.httpListen, "http-listen", ":9980", "HTTP API address (all interfaces by default)")
	fs.StringVar(&c.rpcListen, "rpc-listen", ":18800", "MessagePack-RPC address, e.g. 127.0.0.1:18800 for loopback only (empty: off)")
	fs.StringVar(&c.rpcDialect, "rpc-dialect", "raw", "MessagePack dialect of RPC answers: raw (LMQ's, for old client libraries) or current")
	fs.IntVar(&c.rpcMaxFrame, "rpc-max-frame", 64<<20, "largest MessagePack-RPC request in bytes; a larger one closes its connection")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "JetStream storage directory of the embedded NATS server")
	fs.StringVar(&c.natsURL, "nats-url", "", "use these NATS servers (comma-separated nats:// URLs) instead of the embedded one")
	fs.DurationVar(&c.natsWait, "nats-wait", 2*time.Minute, "how long the start waits for a --nats-url server to answer (unreachable, or a host name that does not resolve yet), retrying with a log line each attempt, before it fails; 0: forever")
	fs.StringVar(&c.natsListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server, for NATS programs, which authenticate (see --nats-listen-auth); empty: in-process only")
	fs.IntVar(&c.replicas, "replicas", 1, "replicas of the shard streams and buckets this gateway creates, 1 to 5 (3 recommended in a cluster)")
	fs.StringVar(&c.consumerStore, "consumer-storage", "memory", "where JetStream keeps the state of the queues' consumers (deliveries in flight, delivery counts): memory (faster: pull+ack across 1,000 queues in use took a third of the CPU per message) or file (as older versions did: after a restart of NATS, deliveries in flight come back when their timeout ends and keep their delivery counts; with memory they come back at once and their retry counts start again). Messages are on disk either way. Existing consumers keep their storage until JetStream removes them unused")
	fs.Int64Var(&c.maxBody, "max-body", 256<<20, "largest request body (message) in bytes; larger ones are answered 413 (a push larger than a NATS message is streamed to the Object Store, not held in memory)")
	fs.Int64Var(&c.maxBuffered, "max-buffered-body", 32<<20, "largest body held in memory whole: batches, push to all queues (qre), pushes to accumulating queues, properties; larger ones are answered 413")
	fs.IntVar(&c.maxHeaderLen, "max-header-bytes", 64<<10, "largest HTTP request line and headers in bytes; larger ones are answered 431 (a stored header value: content-type, kept headers, at most 4 KiB each and 6 KiB together, also 431)")
	fs.IntVar(&c.maxPayload, "max-payload", 8<<20, "embedded NATS max_payload in bytes; larger messages go to the Object Store")
	fs.Var(&c.maxStore, "max-store", maxStoreUsage)
	fs.BoolVar(&c.syncAlways, "sync-always", false, "embedded NATS fsyncs every write (durable across power loss, slower)")
	fs.StringVar(&c.serverName, "server-name", "", "embedded NATS server name (required in a cluster, unique per node; a single node defaults to the host name)")
	fs.StringVar(&c.clusterName, "cluster-name", "", "form a JetStream cluster of embedded servers with this name")
	fs.StringVar(&c.clusterListen, "cluster-listen", "", "cluster route address of the embedded server (host:port)")
	fs.StringVar(&c.routes, "routes", "", "cluster routes, comma-separated nats-route:// URLs of all nodes")
	addSQSFlags(fs, &c.sqs)
	addNATSFlags(fs, &c.nats)
	addNATSListenFlags(fs, &c.natsAuth)

	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&c.accessLog, "access-log", true, "log every HTTP request at level info (off is faster)")

	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs --tls-key")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.StringVar(&c.authToken, "auth-token", "", "require \"Authorization: Bearer `TOKEN`\" on every HTTP endpoint but /healthz and /readyz")
	fs.StringVar(&c.authBasic, "auth-basic", "", "require HTTP basic authentication with `USER:PASSWORD` (like --auth-token; either is accepted when both are set)")
	fs.BoolVar(&c.tokens, "tokens", false, "require a token on every HTTP endpoint but /healthz and /readyz: tokens scoped to queues (a name prefix or a regexp) with rights push, pull, admin, made with \"lmq-gateway token create\" (POST /tokens) and kept, hashed, in the KV bucket LMQ_TOKENS that every gateway watches (at most 10000 tokens); sent as \"Authorization: Bearer TOKEN\" or ?token=TOKEN. --auth-token and --auth-basic stay valid as the operator's credential with every right (needed to create the first token). MessagePack-RPC is not covered: as with --auth-token, a --rpc-listen beyond loopback then needs --rpc-tls-client-ca or --rpc-allow-unauthenticated")

	fs.StringVar(&c.allowedOrigins, "allowed-origins", "", "comma-separated browser `ORIGINS` (scheme://host[:port], e.g. https://a.example,https://b.example) whose pages may make state-changing HTTP requests (POST, PUT, PATCH, DELETE) with the browser's credentials, besides the gateway's own origin. "+
		"Such a request from a page of any other origin (Sec-Fetch-Site cross-site or same-site, or an Origin header naming another host than the request's) is refused 403; requests without Origin and Sec-Fetch-Site (LMQ clients, SDKs, curl) are not concerned (empty: the gateway's own origin only). "+
		"The same origins may call the SQS API's actions that change state from their scripts (--sqs-listen; there the action decides, not the method, see docs/sqs.md)")
	fs.IntVar(&c.maxWaitingPulls, "max-waiting-pulls", 10000, "pulls (HTTP, RPC and SQS) that may wait for a message at once; more are answered 503 with Retry-After (RPC: \"unavailable\") (0: no limit)")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send its request headers")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "keep-alive connections idle this long are closed")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 15*time.Second, "on SIGTERM, time left to requests in flight before connections are closed")

	fs.StringVar(&c.statsdAddr, "statsd-addr", "", "send LMQ's StatsD metrics to this UDP host:port, e.g. localhost:8125 (empty: off)")
	fs.DurationVar(&c.statsdInterval, "statsd-interval", 10*time.Second, "how often StatsD metrics are sent")
	fs.BoolVar(&c.ui, "ui", true, "serve the web console at /ui/ (queues, properties, dead letters, cluster), behind the same authentication as the API; --ui=false turns it off. Its list pages hold at most 500 queues, a peek at most 50 messages of at most 64 KiB each, rate history 6 minutes for at most 20000 queues")
	fs.StringVar(&c.debugListen, "debug-listen", "", "serve Go's pprof profiles (/debug/pprof/) on this separate address, e.g. 127.0.0.1:6060 (empty: off). WARNING: no authentication; it exposes memory contents and CPU time to anyone who reaches it, so bind it to loopback (any other address is logged as a warning)")
	fs.StringVar(&c.portsFile, "ports-file", "", "once every listener is bound, write the addresses bound to `PATH` as JSON, e.g. {\"http\":\"127.0.0.1:40123\",\"rpc\":...,\"nats\":...,\"cluster\":...,\"debug\":...,\"sqs\":...,\"complete\":true} (a listener that is off is left out), replacing the file atomically; with port 0 in a listen address (--http-listen 127.0.0.1:0, also --rpc-listen, --nats-listen, --cluster-listen, --debug-listen) this is how to learn the port picked. Written a first time, without \"complete\", as soon as the embedded NATS server listens: a new cluster node binds HTTP only once other nodes joined it through its --cluster-listen port (empty: not written)")
	addLimitFlags(fs, &c.limits)
	return fs
}

const usageHead = `Usage: lmq-gateway [serve] [flags]
       lmq-gateway status [--http ADDR] [flags]   print nodes and queues of a running gateway
       lmq-gateway version                        print the version
       lmq-gateway migrate --from URL [--to-nats URL] [--queues RE] [--dry-run]
                                                  copy a running LMQ into the gateway
       lmq-gateway names [--json] QUEUE...        print a queue's JetStream stream, subjects and consumer
       lmq-gateway token create|list|revoke ...   manage the access tokens of a gateway run with --tokens

Serves the LMQ API (HTTP, MessagePack-RPC), and optionally Amazon SQS's, on NATS JetStream.

Settings come from, in this order of precedence:
  1. flags on the command line,
  2. environment variables: --http-listen is LMQ_HTTP_LISTEN,
  3. the config file (--config or LMQ_CONFIG): one "name = value" per line,
     names as the flags' without dashes in front, "#" starts a comment, and
     values may be double-quoted; e.g.  http-listen = 127.0.0.1:9980
  4. the defaults below.

Flags:
`

// usage prints the flags with their defaults and environment variables.
func usage(fs *flag.FlagSet, out io.Writer) {
	fmt.Fprint(out, usageHead)
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(out, "%s\n    \t%s\n    \t(default %s; env %s)\n", line, text, def, envName(f.Name))
	})
}

// parseConfig reads the serve command's settings: flags win over LMQ_*
// environment variables, which win over the config file, which wins over the
// defaults. getenv is os.Getenv's lookup (tests pass their own).
func parseConfig(args []string, getenv func(string) (string, bool), out io.Writer) (*config, error) {
	c := &config{}
	fs := newFlagSet(c, out)
	fs.Usage = func() { usage(fs, out) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	explicit := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	// The config file's name itself may come from the environment.
	if !explicit["config"] {
		if v, ok := getenv(envName("config")); ok {
			c.configFile = v
		}
	}
	if c.configFile != "" {
		settings, err := readConfigFile(c.configFile)
		if err != nil {
			return nil, err
		}
		for _, s := range settings {
			if s.name == "config" {
				return nil, fmt.Errorf("%s:%d: a config file cannot name another", c.configFile, s.line)
			}
			f := fs.Lookup(s.name)
			if f == nil {
				return nil, fmt.Errorf("%s:%d: unknown setting %q", c.configFile, s.line, s.name)
			}
			if explicit[s.name] {
				continue
			}
			if _, ok := getenv(envName(s.name)); ok {
				continue
			}
			if err := f.Value.Set(s.value); err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", c.configFile, s.line, s.name, err)
			}
		}
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if explicit[f.Name] || f.Name == "config" || envErr != nil {
			return
		}
		key := envName(f.Name)
		if v, ok := getenv(key); ok {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", key, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	return c, c.validate()
}

// maxReplicas is JetStream's largest replication factor of a stream.
const maxReplicas = 5

func (c *config) validate() error {
	if err := checkNATSFlags(c.natsURL, c.nats); err != nil {
		return err
	}
	if err := checkNATSListenFlags(c.natsURL, c.natsListen, c.natsAuth); err != nil {
		return err
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.authBasic != "" && !strings.Contains(c.authBasic, ":") {
		return errors.New("--auth-basic wants USER:PASSWORD")
	}
	if c.maxWaitingPulls < 0 {
		return errors.New("--max-waiting-pulls must not be negative")
	}
	if c.natsWait < 0 {
		return errors.New("--nats-wait must not be negative")
	}
	if c.replicas < 1 || c.replicas > maxReplicas {
		return fmt.Errorf("--replicas %d: want 1 to %d (JetStream's limit; 3 in a cluster of three)", c.replicas, maxReplicas)
	}
	if c.natsURL != "" && c.maxStore != 0 {
		return errors.New("--max-store is the embedded server's storage limit; with --nats-url set max_file_store in nats-server's configuration (or the account's JetStream limits)")
	}
	if c.consumerStore != "memory" && c.consumerStore != "file" {
		return fmt.Errorf("--consumer-storage %q: want memory or file", c.consumerStore)
	}
	if _, err := httpapi.NewCrossOriginProtection(c.origins()); err != nil {
		return fmt.Errorf("--allowed-origins: %w", err)
	}
	if err := c.sqs.check(); err != nil {
		return err
	}
	if err := c.limits.check(c); err != nil {
		return err
	}
	return nil
}

// origins are the --allowed-origins.
func (c *config) origins() []string {
	var out []string
	for _, o := range strings.Split(c.allowedOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// setting is one "name = value" line of a config file.
type setting struct {
	name, value string
	line        int
}

// readConfigFile parses a config file: "name = value" lines, blank lines and
// "#" comments; a value may be double-quoted (Go syntax) to keep spaces or a
// "#".
func readConfigFile(path string) ([]setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	return parseConfigFile(f, path)
}

func parseConfigFile(r io.Reader, path string) ([]setting, error) {
	var out []setting
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want name = value", path, n)
		}
		name = strings.TrimPrefix(strings.TrimSpace(name), "--")
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, `"`) {
			end := closingQuote(value)
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated quoted value", path, n)
			}
			rest := strings.TrimSpace(value[end+1:])
			if rest != "" && !strings.HasPrefix(rest, "#") {
				return nil, fmt.Errorf("%s:%d: text after the quoted value", path, n)
			}
			uq, err := strconv.Unquote(value[:end+1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: quoted value: %w", path, n, err)
			}
			value = uq
		} else if i := strings.Index(value, " #"); i >= 0 {
			value = strings.TrimSpace(value[:i])
		}
		out = append(out, setting{name: name, value: value, line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return out, nil
}

// closingQuote finds the quote ending a Go string literal that starts s.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
