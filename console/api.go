package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// Bounds of the console's API.
const (
	// DefaultLimit and MaxLimit bound the rows of one page of the queue list.
	DefaultLimit = 50
	MaxLimit     = 500
	// maxRegexp bounds the filter's length, like a query string would.
	maxRegexp = 4096
	// ageWorkers bound the peeks made at once for a page's oldest ages.
	ageWorkers = 8
	// ageTimeout bounds the peeks of one page: the list answers without the
	// ages it could not get in time.
	ageTimeout = 2 * time.Second
	// maxMatchBody bounds the body of POST /ui/api/match (a list being
	// edited).
	maxMatchBody = 1 << 20
)

// Row is one queue of the queue list.
type Row struct {
	Name        string  `json:"name"`
	Waiting     uint64  `json:"waiting"`
	InFlight    uint64  `json:"in_flight"`
	Delayed     uint64  `json:"delayed"`
	DeadLetters uint64  `json:"dead_letters"`
	Bytes       uint64  `json:"bytes"`
	PushRate    float64 `json:"push_rate"`
	PullRate    float64 `json:"pull_rate"`
	// OldestAge is the age in seconds of the oldest waiting message (the
	// earliest pushed of its priority levels' next ones); null when none
	// waits or it is not known.
	OldestAge *float64 `json:"oldest_age"`
	// Paused is the queue's paused property (queue control): the list
	// marks such a queue.
	Paused bool `json:"paused"`
}

// QueuePage is the answer of GET /ui/api/queues.
type QueuePage struct {
	// Total counts every queue; Matched those the filter kept.
	Total   int   `json:"total"`
	Matched int   `json:"matched"`
	Offset  int   `json:"offset"`
	Limit   int   `json:"limit"`
	Rows    []Row `json:"rows"`
	// Interval is the rates' sampling interval in seconds.
	Interval float64 `json:"interval"`
}

// sortKeys are the columns the list sorts by; ties are broken by name.
var sortKeys = map[string]func(a, b *Row) int{
	"name":         func(a, b *Row) int { return 0 },
	"waiting":      func(a, b *Row) int { return cmp.Compare(a.Waiting, b.Waiting) },
	"in_flight":    func(a, b *Row) int { return cmp.Compare(a.InFlight, b.InFlight) },
	"delayed":      func(a, b *Row) int { return cmp.Compare(a.Delayed, b.Delayed) },
	"dead_letters": func(a, b *Row) int { return cmp.Compare(a.DeadLetters, b.DeadLetters) },
	"bytes":        func(a, b *Row) int { return cmp.Compare(a.Bytes, b.Bytes) },
	"push_rate":    func(a, b *Row) int { return cmp.Compare(a.PushRate, b.PushRate) },
	"pull_rate":    func(a, b *Row) int { return cmp.Compare(a.PullRate, b.PullRate) },
}

// listQuery is the parsed query of GET /ui/api/queues.
type listQuery struct {
	re            *regexp.Regexp
	sort          string
	desc          bool
	offset, limit int
}

func parseListQuery(q map[string][]string) (listQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lq := listQuery{sort: "name", limit: DefaultLimit}
	if s := get("re"); s != "" {
		if len(s) > maxRegexp {
			return lq, fmt.Errorf("re: longer than %d bytes", maxRegexp)
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return lq, fmt.Errorf("re: %w", err)
		}
		lq.re = re
	}
	if s := get("sort"); s != "" {
		if _, ok := sortKeys[s]; !ok {
			return lq, fmt.Errorf("sort: %q is not a column (name, waiting, in_flight, delayed, dead_letters, bytes, push_rate, pull_rate)", s)
		}
		lq.sort = s
	}
	switch s := get("desc"); s {
	case "", "0", "false":
	case "1", "true":
		lq.desc = true
	default:
		return lq, fmt.Errorf("desc: %q is not 0, 1, true or false", s)
	}
	var err error
	if lq.offset, err = intParam(get("offset"), 0, 1<<31-1, 0); err != nil {
		return lq, fmt.Errorf("offset: %w", err)
	}
	if lq.limit, err = intParam(get("limit"), 1, MaxLimit, DefaultLimit); err != nil {
		return lq, fmt.Errorf("limit: %w", err)
	}
	return lq, nil
}

func intParam(s string, lo, hi, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q is not an integer from %d to %d", s, lo, hi)
	}
	return n, nil
}

// serveQueues answers one page of the queue list: filtered by an RE2
// regexp (unanchored, like qre), sorted by a column, with the sizes of the
// cached inventory, the rates of the sampler, and for the page's rows only
// the age of their next waiting message.
func (c *Console) serveQueues(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	views, err := c.inv.Queues(r.Context(), nil)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	page := QueuePage{Total: len(views), Offset: lq.offset, Limit: lq.limit, Interval: SampleInterval.Seconds()}
	rows := make([]Row, 0, len(views))
	for i := range views {
		v := &views[i]
		if lq.re != nil && !lq.re.MatchString(v.Name) {
			continue
		}
		row := rowOf(v)
		row.PushRate, row.PullRate = c.rates.rates(v.Name)
		rows = append(rows, row)
	}
	sortRows(rows, lq.sort, lq.desc)
	page.Matched = len(rows)
	lo := min(lq.offset, len(rows))
	hi := min(lo+lq.limit, len(rows))
	page.Rows = rows[lo:hi]
	c.oldestAges(r.Context(), page.Rows)
	writeJSON(w, http.StatusOK, page)
}

func sortRows(rows []Row, key string, desc bool) {
	by := sortKeys[key]
	slices.SortFunc(rows, func(a, b Row) int {
		d := by(&a, &b)
		if desc {
			d = -d
		}
		if d == 0 {
			d = strings.Compare(a.Name, b.Name)
			if desc && key == "name" {
				d = -d
			}
		}
		return d
	})
}

// oldestAges fills in the age of each row's oldest waiting message, looking
// at a bounded number of queues at once; ages not known in time stay null.
func (c *Console) oldestAges(ctx context.Context, rows []Row) {
	ctx, cancel := context.WithTimeout(ctx, ageTimeout)
	defer cancel()
	now := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(ageWorkers, len(rows)) {
		wg.Go(func() {
			for i := range jobs {
				at, err := c.core.Inspect.OldestWaiting(ctx, rows[i].Name)
				if err != nil || at.IsZero() {
					continue
				}
				age := max(now.Sub(at).Seconds(), 0)
				rows[i].OldestAge = &age
			}
		})
	}
	for i := range rows {
		if rows[i].Waiting > 0 {
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
}

// unavailable answers a failure to read JetStream, unless the client left.
func (c *Console) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	switch gateway.KindOf(err) {
	case gateway.KindNotFound:
		writeError(w, http.StatusNotFound, err.Error())
	case gateway.KindInvalid:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		c.log.Warn("console", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// queueName reads the name parameter, validated like the API's.
func queueName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.URL.Query().Get("name")
	if err := mapping.ValidateQueueName(name); err != nil {
		writeError(w, http.StatusBadRequest, "name: "+err.Error())
		return "", false
	}
	return name, true
}

// QueueInfo is the answer of GET /ui/api/queue.
type QueueInfo struct {
	Name         string `json:"name"`
	Size         uint64 `json:"size"`
	Waiting      uint64 `json:"waiting"`
	InFlight     uint64 `json:"in_flight"`
	Delayed      uint64 `json:"delayed"`
	DeadLetters  uint64 `json:"dead_letters"`
	Accumulating uint64 `json:"accumulating"`
	Bytes        uint64 `json:"bytes"`
	// Props are the effective properties; Own those set on the queue.
	Props json.RawMessage `json:"props"`
	Own   json.RawMessage `json:"own"`
	// Default is the default-list entry the name matches, if any.
	Default *Match `json:"default"`
	// Sources says per effective key where its value comes from: "own",
	// "default" (the matching entry) or "system".
	Sources map[string]string `json:"sources"`
	// Interval and the two series are the chart: per-second rates of the
	// last intervals, oldest first.
	Interval float64   `json:"interval"`
	Push     []float64 `json:"push"`
	Pull     []float64 `json:"pull"`
}

// Match is a default-list entry: its 1-based position, regexp and props.
type Match struct {
	Index  int             `json:"index"`
	Regexp string          `json:"regexp"`
	Props  json.RawMessage `json:"props"`
}

func (c *Console) serveQueue(w http.ResponseWriter, r *http.Request) {
	name, ok := queueName(w, r)
	if !ok {
		return
	}
	d, err := c.core.Inspect.QueueDetail(r.Context(), name)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	own, err := c.core.Queues.OwnProps(r.Context(), name)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	defaults, err := c.core.Queues.DefaultProps(r.Context())
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	info := QueueInfo{
		Name:         name,
		Size:         d.Size,
		Waiting:      d.Size - min(d.InFlight, d.Size),
		InFlight:     d.InFlight,
		Delayed:      d.Delayed,
		DeadLetters:  d.DeadLetters,
		Accumulating: d.Parts,
		Bytes:        d.Bytes,
		Props:        d.Props.JSON(),
		Own:          own.JSON(),
		Interval:     SampleInterval.Seconds(),
	}
	var entry mapping.Props
	if i := firstMatch(defaults, name); i >= 0 {
		e := defaults[i]
		entry = e.Props
		info.Default = &Match{Index: i + 1, Regexp: e.Pattern, Props: e.Props.JSON()}
	}
	info.Sources = sources(d.Props.JSON(), own.JSON(), entry.JSON())
	info.Push, info.Pull = c.rates.series(name)
	writeJSON(w, http.StatusOK, info)
}

// firstMatch is the index of the default-list entry that applies to name
// (the first that matches, as mapping.DefaultList.Match decides), -1 when
// none does.
func firstMatch(l mapping.DefaultList, name string) int {
	for i, e := range l {
		if _, ok := (mapping.DefaultList{e}).Match(name); ok {
			return i
		}
	}
	return -1
}

// sources names, for each key of the effective properties, the layer that
// set it: the queue's own properties win over the default entry, which wins
// over the system defaults.
func sources(effective, own, entry []byte) map[string]string {
	keys := func(b []byte) map[string]bool {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		out := make(map[string]bool, len(m))
		for k := range m {
			out[k] = true
		}
		return out
	}
	o, d := keys(own), keys(entry)
	out := map[string]string{}
	for k := range keys(effective) {
		switch {
		case o[k]:
			out[k] = "own"
		case d[k]:
			out[k] = "default"
		default:
			out[k] = "system"
		}
	}
	return out
}

// PeekedMessage is one message of GET /ui/api/peek.
type PeekedMessage struct {
	Seq uint64 `json:"seq"`
	// Priority is the message's priority, 0..9 (for a dead letter, the
	// one it had).
	Priority    int               `json:"priority"`
	ContentType string            `json:"content_type"`
	Group       string            `json:"group,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	PushedAt    *time.Time        `json:"pushed_at,omitempty"`
	Age         *float64          `json:"age,omitempty"`
	Expires     *time.Time        `json:"expires,omitempty"`
	DiedAt      *time.Time        `json:"died_at,omitempty"`
	Retry       *int              `json:"retry,omitempty"`
	Delivered   int               `json:"delivered"`
	Size        int64             `json:"size"`
	Object      bool              `json:"object"`
	// Body is the (possibly cut) body; JSON encodes it as base64.
	Body       []byte       `json:"body,omitempty"`
	Truncated  bool         `json:"truncated"`
	Compound   bool         `json:"compound"`
	PartCount  int          `json:"part_count,omitempty"`
	Parts      []PeekedPart `json:"parts,omitempty"`
	PartsError string       `json:"parts_error,omitempty"`
}

// PeekedPart is one part of a compound message.
type PeekedPart struct {
	ContentType string            `json:"content_type"`
	Headers     map[string]string `json:"headers,omitempty"`
	Body        []byte            `json:"body"`
}

// servePeek answers the next waiting messages of a queue, or with dead=1
// its oldest dead letters, without taking them.
func (c *Console) servePeek(w http.ResponseWriter, r *http.Request) {
	name, ok := queueName(w, r)
	if !ok {
		return
	}
	n, err := intParam(r.URL.Query().Get("n"), 1, gateway.MaxPeek, 10)
	if err != nil {
		writeError(w, http.StatusBadRequest, "n: "+err.Error())
		return
	}
	peek := c.core.Inspect.Peek
	switch r.URL.Query().Get("dead") {
	case "", "0", "false":
	case "1", "true":
		peek = c.core.Inspect.PeekDead
	default:
		writeError(w, http.StatusBadRequest, "dead: not 0, 1, true or false")
		return
	}
	ps, err := peek(r.Context(), name, n)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	now := time.Now()
	out := make([]PeekedMessage, 0, len(ps))
	for _, p := range ps {
		m := PeekedMessage{
			Seq:         p.Seq,
			Priority:    p.Priority,
			Group:       strings.ToValidUTF8(p.Group, "\uFFFD"),
			ContentType: cmp.Or(p.ContentType, mapping.DefaultContentType),
			Headers:     headerMap(p.Kept),
			Delivered:   p.Delivered,
			Size:        p.Size,
			Object:      p.Object,
			Body:        p.Body,
			Truncated:   p.Truncated,
			Compound:    p.Compound,
			PartCount:   p.PartCount,
			PartsError:  p.PartsError,
		}
		if !p.PushedAt.IsZero() {
			t := p.PushedAt.UTC()
			age := max(now.Sub(t).Seconds(), 0)
			m.PushedAt, m.Age = &t, &age
		}
		if !p.Expires.IsZero() {
			t := p.Expires.UTC()
			m.Expires = &t
		}
		if !p.DiedAt.IsZero() {
			t := p.DiedAt.UTC()
			m.DiedAt = &t
		}
		if p.Retry >= 0 {
			retry := p.Retry
			m.Retry = &retry
		}
		for _, part := range p.Parts {
			m.Parts = append(m.Parts, PeekedPart{
				ContentType: cmp.Or(part.ContentType, mapping.DefaultContentType),
				Headers:     headerMap(part.Kept),
				Body:        part.Body,
			})
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
}

// headerMap renders kept headers; values that are not UTF-8 (read back
// from JetStream, they may be anything) are replaced, so that the JSON
// stays valid text.
func headerMap(hs []gateway.Header) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[strings.ToValidUTF8(h.Name, "\uFFFD")] = strings.ToValidUTF8(h.Value, "\uFFFD")
	}
	return m
}

// serveMatch answers which default-list entry applies to a name, and the
// properties a queue of that name without its own would have. GET tests the
// stored list; POST {"name":…, "list":[…]} tests a list being edited
// (invalid: 400 with the API's text).
func (c *Console) serveMatch(w http.ResponseWriter, r *http.Request) {
	var name string
	var list mapping.DefaultList
	if r.Method == http.MethodPost {
		if !auth.RequireJSON(w, r) {
			return
		}
		var body struct {
			Name string          `json:"name"`
			List json.RawMessage `json:"list"`
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMatchBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than 1 MiB")
			return
		}
		if err := json.Unmarshal(b, &body); err != nil {
			writeError(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
		if list, err = mapping.ParseDefaultList(body.List); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		name = body.Name
	} else {
		var err error
		if list, err = c.core.Queues.DefaultProps(r.Context()); err != nil {
			c.unavailable(w, r, err)
			return
		}
		name = r.URL.Query().Get("name")
	}
	if err := mapping.ValidateQueueName(name); err != nil {
		writeError(w, http.StatusBadRequest, "name: "+err.Error())
		return
	}
	out := map[string]any{"name": name, "match": nil}
	if i := firstMatch(list, name); i >= 0 {
		out["match"] = Match{Index: i + 1, Regexp: list[i].Pattern, Props: list[i].Props.JSON()}
	}
	out["effective"] = json.RawMessage(mapping.Resolve(list, name, mapping.Props{}).JSON())
	writeJSON(w, http.StatusOK, out)
}

// Cluster is the answer of GET /ui/api/cluster.
type Cluster struct {
	Gateway GatewayInfo `json:"gateway"`
	// OtherGateways are the ids of the other gateways on the same NATS
	// system that this one hears (their heartbeats, gateway/peers.go).
	OtherGateways []string `json:"other_gateways"`
	ActiveNodes   []string `json:"active_nodes"`
	AllNodes      []string `json:"all_nodes"`
	Queues        int      `json:"queues"`
	Streams       []Stream `json:"streams"`
}

// GatewayInfo describes the gateway that answered.
type GatewayInfo struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Auth    string `json:"auth"`
}

// Stream is one JetStream stream holding queues, with its placement.
type Stream struct {
	Name     string    `json:"name"`
	Queues   int       `json:"queues"`
	Messages uint64    `json:"messages"`
	Leader   string    `json:"leader"`
	Replicas []Replica `json:"replicas"`
	// Healthy: every replica is current (or there is no cluster).
	Healthy bool `json:"healthy"`
}

// Replica is one server holding a stream.
type Replica struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
}

// serveCluster answers what `lmq-gateway status` prints and more: the NATS
// servers, and per stream holding queues its leader and replicas.
func (c *Console) serveCluster(w http.ResponseWriter, r *http.Request) {
	doc, err := c.inv.Document(r.Context(), nil)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	views, err := c.inv.Queues(r.Context(), nil)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	out := Cluster{
		Gateway:       GatewayInfo{ID: c.core.Gateway.ID(), Version: c.opt.Version, Auth: c.inv.AuthMode()},
		OtherGateways: c.core.Gateway.Peers(),
		ActiveNodes:   doc.ActiveNodes,
		AllNodes:      doc.AllNodes,
		Queues:        len(views),
		Streams:       streamsOf(views),
	}
	writeJSON(w, http.StatusOK, out)
}

// streamsOf groups the queues by the stream holding them (several queues
// share one), with the placement their views report.
func streamsOf(views []ops.QueueView) []Stream {
	by := map[string]*Stream{}
	for i := range views {
		v := &views[i]
		name := mapping.StreamName(v.Name)
		s := by[name]
		if s == nil {
			s = &Stream{Name: name, Replicas: []Replica{}, Healthy: true}
			current := map[string]bool{}
			for _, n := range v.Current {
				current[n] = true
			}
			for j, n := range v.Nodes {
				if j == 0 {
					s.Leader = n
				}
				s.Replicas = append(s.Replicas, Replica{Name: n, Current: current[n]})
				s.Healthy = s.Healthy && current[n]
			}
			by[name] = s
		}
		s.Queues++
		s.Messages += v.Size
	}
	out := make([]Stream, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Stream) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Rates is the answer of GET /ui/api/rates: the long histories (pushes
// and pulls per minute) of this gateway and of the whole cluster, with the
// Prometheus series to ask for anything longer.
type Rates struct {
	// Gateway is this gateway's id.
	Gateway string `json:"gateway"`
	// This is this gateway's history (all its queues).
	This LongHistory `json:"this"`
	// Cluster is the sum over every gateway heard (this one included);
	// Gateways are those whose samples arrive now (this one first), and
	// Shared whether this gateway sends and hears samples at all.
	Cluster  LongHistory `json:"cluster"`
	Gateways []string    `json:"gateways"`
	Shared   bool        `json:"shared"`
	// Series are the Prometheus counters (on /metrics, per queue) that
	// hold the same counts, for longer graphs: sum them over the gateways,
	// e.g. sum(rate(lmq_pushes_total[1m])).
	Series []string `json:"series"`
}

// PrometheusSeries are the counters the long histories are made of, as
// ops/metrics.go names them.
var PrometheusSeries = []string{"lmq_pushes_total", "lmq_pulls_total"}

func (c *Console) serveRates(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	c.rates.mu.Lock()
	shared := c.rates.bus != nil
	c.rates.mu.Unlock()
	writeJSON(w, http.StatusOK, Rates{
		Gateway:  c.core.Gateway.ID(),
		This:     c.rates.longHistory(&c.rates.long, now),
		Cluster:  c.rates.longHistory(&c.rates.cluster, now),
		Gateways: append([]string{c.core.Gateway.ID()}, c.rates.livePeers()...),
		Shared:   shared,
		Series:   PrometheusSeries,
	})
}
