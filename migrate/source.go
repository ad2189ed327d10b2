package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// errGone is the source's 404 to a reply: the delivery id is unknown (it timed
// out, the source restarted, or an earlier attempt of the same ack went through).
var errGone = errors.New("delivery id unknown to the source")

// source is a client of the old LMQ's HTTP API.
type source struct {
	base  string // without trailing slash
	hc    *http.Client
	retry time.Duration // how long an unreachable source is retried
	log   *slog.Logger

	mu       sync.Mutex
	reached  bool // the source has answered once
	down     bool // the last request failed for want of the source
	restarts int  // times the source came back after being unreachable
}

// pulled is one message handed out by the source.
type pulled struct {
	id       string
	retry    int // x-lmq-retry-remaining; -1 when absent
	compound bool
	msg      gateway.Message   // normal message
	parts    []gateway.Message // compound message
	size     int               // bytes of content
}

// httpError is a status the source answered that the caller did not expect.
type httpError struct {
	method, path string
	status       int
	body         string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.method, e.path, e.status, strings.TrimSpace(e.body))
}

// transient reports whether a failure may go away by itself: the source is
// restarting, or a proxy in front of it is.
func transient(err error, status int) bool {
	if err != nil {
		return true
	}
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// do sends one request, retrying for s.retry while the source is unreachable.
// Retrying is safe for every request the migrator makes: a pull whose answer
// was lost leaves a delivery on the source that times out and comes back (one
// retry less), and an ack sent twice answers 404 the second time, which the
// caller treats as a possible duplicate.
func (s *source) do(ctx context.Context, method, path string, query url.Values, ctype string, body []byte, wait time.Duration) (int, http.Header, []byte, error) {
	u := s.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var firstFail time.Time
	backoff := 100 * time.Millisecond
	for {
		status, hdr, data, err := s.once(ctx, method, u, ctype, body, wait)
		if err == nil && !transient(nil, status) {
			s.up()
			return status, hdr, data, nil
		}
		if ctx.Err() != nil {
			return 0, nil, nil, ctx.Err()
		}
		if err != nil && !s.wasReached() && hopeless(err) {
			// A typo in --from, not a source restarting: retrying for
			// --retry-for would only delay the message.
			return 0, nil, nil, fmt.Errorf("--from %s: %w", s.base, err)
		}
		if firstFail.IsZero() {
			firstFail = time.Now()
		}
		if time.Since(firstFail) > s.retry {
			if err == nil {
				err = &httpError{method: method, path: path, status: status, body: string(data)}
			}
			return 0, nil, nil, fmt.Errorf("source unreachable for %v: %w", s.retry.Round(time.Second), err)
		}
		s.markDown(method, path, status, err)
		select {
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (s *source) once(ctx context.Context, method, u, ctype string, body []byte, wait time.Duration) (int, http.Header, []byte, error) {
	// A long-poll may take wait; the rest is for reading a large body.
	rctx, cancel := context.WithTimeout(ctx, wait+2*time.Minute)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, resp.Header, data, nil
}

func (s *source) markDown(method, path string, status int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down {
		s.log.Warn("source not answering; retrying", "request", method+" "+path, "status", status, "err", err)
	}
	s.down = true
}

// hopeless tells the failures of a first request that waiting will not
// cure: a host name that does not resolve, a port nobody listens on.
func hopeless(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED)
}

func (s *source) wasReached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reached
}

func (s *source) up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reached = true
	if s.down {
		s.down = false
		s.restarts++
		s.log.Info("source answering again")
	}
}

// interruptions is how many times the source became unreachable and came back.
func (s *source) interruptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

func (s *source) expect(method, path string, status int, data []byte, want ...int) error {
	for _, w := range want {
		if status == w {
			return nil
		}
	}
	return &httpError{method: method, path: path, status: status, body: string(data)}
}

// escape percent-encodes a queue name (or id) as one path segment. Everything
// but unreserved characters is escaped: url.PathEscape leaves "+" alone, which
// LMQ's HTTP library turned into a space.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// queueSizes reads GET /stats: every queue and its size (waiting and in flight).
func (s *source) queueSizes(ctx context.Context) (map[string]int64, error) {
	status, _, data, err := s.do(ctx, http.MethodGet, "/stats", nil, "", nil, 0)
	if err != nil {
		return nil, err
	}
	if err := s.expect(http.MethodGet, "/stats", status, data, http.StatusOK); err != nil {
		return nil, err
	}
	return parseStats(data)
}

// sizesOnce is queueSizes with a single attempt, for progress reports.
func (s *source) sizesOnce(ctx context.Context) (map[string]int64, error) {
	status, _, data, err := s.once(ctx, http.MethodGet, s.base+"/stats", "", nil, 0)
	if err != nil {
		return nil, err
	}
	if err := s.expect(http.MethodGet, "/stats", status, data, http.StatusOK); err != nil {
		return nil, err
	}
	return parseStats(data)
}

func parseStats(data []byte) (map[string]int64, error) {
	var st struct {
		Queues json.RawMessage `json:"queues"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := map[string]int64{}
	// LMQ printed "queues":[] when it had none.
	if t := bytes.TrimSpace(st.Queues); len(t) == 0 || t[0] == '[' || bytes.Equal(t, []byte("null")) {
		return out, nil
	}
	var qs map[string]struct {
		Size json.Number `json:"size"`
	}
	if err := json.Unmarshal(st.Queues, &qs); err != nil {
		return nil, fmt.Errorf("stats queues: %w", err)
	}
	for name, q := range qs {
		n, _ := q.Size.Int64()
		out[name] = n
	}
	return out, nil
}

// defaultList reads GET /properties: the default list's JSON text.
func (s *source) defaultList(ctx context.Context) ([]byte, error) {
	status, _, data, err := s.do(ctx, http.MethodGet, "/properties", nil, "", nil, 0)
	if err != nil {
		return nil, err
	}
	if err := s.expect(http.MethodGet, "/properties", status, data, http.StatusOK); err != nil {
		return nil, err
	}
	return data, nil
}

// props reads a queue's effective properties (without creating the queue).
func (s *source) props(ctx context.Context, queue string) (mapping.Effective, error) {
	path := "/properties/" + escape(queue)
	status, _, data, err := s.do(ctx, http.MethodGet, path, nil, "", nil, 0)
	if err != nil {
		return mapping.Effective{}, err
	}
	if err := s.expect(http.MethodGet, path, status, data, http.StatusOK); err != nil {
		return mapping.Effective{}, err
	}
	p, err := mapping.ParseProps(data)
	if err != nil {
		return mapping.Effective{}, fmt.Errorf("properties of %q: %w", queue, err)
	}
	// Resolving against nothing fills any key the source left out.
	return mapping.Resolve(nil, queue, p), nil
}

// setTimeout changes the queue's timeout on the source.
func (s *source) setTimeout(ctx context.Context, queue string, seconds float64) error {
	path := "/properties/" + escape(queue)
	body := mapping.Props{Timeout: &seconds}.JSON()
	status, _, data, err := s.do(ctx, http.MethodPatch, path, nil, "application/json", body, 0)
	if err != nil {
		return err
	}
	return s.expect(http.MethodPatch, path, status, data, http.StatusNoContent, http.StatusOK)
}

// pull takes the queue's next message, waiting up to wait; nil when none came.
// kept names the headers the queue's preserve-header hooks keep: for a normal
// message they come back as response headers, among the server's own.
func (s *source) pull(ctx context.Context, queue string, wait time.Duration, kept []string) (*pulled, error) {
	path := "/messages/" + escape(queue)
	q := url.Values{"t": {strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)}, "cf": {"msgpack"}}
	status, hdr, data, err := s.do(ctx, http.MethodGet, path, q, "", nil, wait)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, &httpError{method: http.MethodGet, path: path, status: status, body: string(data)}
	}
	return parseDelivery(hdr, data, kept)
}

// parseDelivery reads a message response of LMQ's HTTP API.
func parseDelivery(hdr http.Header, body []byte, kept []string) (*pulled, error) {
	p := &pulled{id: hdr.Get("X-Lmq-Message-Id"), retry: -1, size: len(body)}
	if p.id == "" {
		return nil, errors.New("message without x-lmq-message-id")
	}
	if v, err := strconv.Atoi(hdr.Get("X-Lmq-Retry-Remaining")); err == nil && v >= 0 {
		p.retry = v
	}
	ctype := hdr.Get("Content-Type")
	if !strings.EqualFold(hdr.Get("X-Lmq-Message-Type"), "compound") {
		p.msg = gateway.Message{ContentType: ctype, Body: body}
		for _, name := range kept {
			for _, v := range hdr.Values(name) {
				p.msg.Kept = append(p.msg.Kept, gateway.Header{Name: strings.ToLower(name), Value: v})
			}
		}
		return p, nil
	}
	p.compound = true
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return nil, fmt.Errorf("compound message %s: content-type %q: %w", p.id, ctype, err)
	}
	switch mt {
	case mapping.ContentTypeMsgpack:
		p.parts, err = partsFromMsgpack(body)
	case "multipart/mixed":
		p.parts, err = partsFromMultipart(body, params["boundary"])
	default:
		err = fmt.Errorf("unexpected content-type %q", ctype)
	}
	if err != nil {
		return nil, fmt.Errorf("compound message %s: %w", p.id, err)
	}
	p.size = 0
	for _, part := range p.parts {
		p.size += len(part.Body)
	}
	return p, nil
}

// partsFromMsgpack reads a cf=msgpack compound body: an array of
// [{header: value}, content] pairs. LMQ's codec wrote strings and binaries as
// the old "raw" type, newer ones as str or bin: mpack accepts either anywhere,
// and bounds its memory by the bytes of the body, whatever counts it declares
// (the source's answers are input like any other).
func partsFromMsgpack(body []byte) ([]gateway.Message, error) {
	pairs, err := mpack.DecodeParts(body, 0)
	if err != nil {
		return nil, fmt.Errorf("msgpack body: %w", err)
	}
	out := make([]gateway.Message, 0, len(pairs))
	for _, pair := range pairs {
		m := gateway.Message{Body: pair.Body}
		// A map has one value per name: the last one sent wins.
		hdr := make(map[string]string, len(pair.Headers))
		for _, h := range pair.Headers {
			hdr[h.Name] = h.Value
		}
		for k, val := range hdr {
			m = withHeader(m, k, val)
		}
		sort.Slice(m.Kept, func(a, b int) bool { return m.Kept[a].Name < m.Kept[b].Name })
		out = append(out, m)
	}
	return out, nil
}

// withHeader adds one part header: content-type, or a kept header. The
// transfer encoding is an artefact of the multipart form, not metadata.
func withHeader(m gateway.Message, name, value string) gateway.Message {
	switch name = strings.ToLower(name); name {
	case "content-type":
		m.ContentType = value
	case "content-transfer-encoding":
	default:
		m.Kept = append(m.Kept, gateway.Header{Name: name, Value: value})
	}
	return m
}

// partsFromMultipart reads a cf=multipart compound body (the boundary is the
// message id).
func partsFromMultipart(body []byte, boundary string) ([]gateway.Message, error) {
	if boundary == "" {
		return nil, errors.New("multipart body without boundary")
	}
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	var out []gateway.Message
	for {
		part, err := r.NextRawPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
		content, err := io.ReadAll(part)
		if err != nil {
			return nil, fmt.Errorf("multipart part %d: %w", len(out)+1, err)
		}
		m := gateway.Message{Body: content}
		for k, vs := range part.Header {
			for _, v := range vs {
				m = withHeader(m, k, v)
			}
		}
		sort.Slice(m.Kept, func(a, b int) bool { return m.Kept[a].Name < m.Kept[b].Name })
		out = append(out, m)
	}
}

// ack acknowledges a delivery on the source; errGone on 404.
func (s *source) ack(ctx context.Context, queue, id string) error {
	return s.reply(ctx, queue, id, "ack")
}

// nack gives a delivery back to the source at once; errGone on 404.
func (s *source) nack(ctx context.Context, queue, id string) error {
	return s.reply(ctx, queue, id, "nack")
}

// reply sends LMQ's reply (ack or nack) to a delivery; errGone on 404.
func (s *source) reply(ctx context.Context, queue, id, reply string) error {
	path := "/messages/" + escape(queue) + "/" + escape(id)
	status, _, data, err := s.do(ctx, http.MethodPost, path, url.Values{"reply": {reply}}, "", nil, 0)
	if err != nil {
		return err
	}
	if status == http.StatusNotFound {
		return errGone
	}
	return s.expect(http.MethodPost, path, status, data, http.StatusNoContent, http.StatusOK)
}
