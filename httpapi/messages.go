package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// One queue's waiting messages (beyond LMQ): GET /queues/{name}/messages
// lists them in the order they will be delivered, without taking them (the
// list the console shows), DELETE /queues/{name}/messages/{id} removes one
// (gateway/messages.go).

// defaultListed is how many messages GET /queues/{name}/messages lists
// without n (the console's default too).
const defaultListed = 10

// waitingMessage is one message of GET /queues/{name}/messages. The id is
// the message's stream sequence, a JSON number: it stays below 2^53 (a
// JavaScript number's exact range) for any stream a gateway can fill (at a
// million messages a second, for 285 years), so no string copy is given.
type waitingMessage struct {
	ID          uint64            `json:"id"`
	Priority    int               `json:"priority"`
	Group       string            `json:"group,omitempty"`
	ContentType string            `json:"content_type"`
	Headers     map[string]string `json:"headers,omitempty"`
	PushedAt    *time.Time        `json:"pushed_at,omitempty"`
	Age         *float64          `json:"age,omitempty"`
	Expires     *time.Time        `json:"expires,omitempty"`
	Retry       *int              `json:"retry,omitempty"`
	Delivered   int               `json:"delivered"`
	Size        int64             `json:"size"`
	Object      bool              `json:"object"`
	Compound    bool              `json:"compound"`
	PartCount   int               `json:"part_count,omitempty"`
	PartsError  string            `json:"parts_error,omitempty"`
	// With body=1 only. JSON encodes Body as base64, as the console's peek.
	Body      []byte        `json:"body,omitempty"`
	Parts     []waitingPart `json:"parts,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// waitingPart is one part of a compound waiting message (body=1).
type waitingPart struct {
	ContentType string            `json:"content_type"`
	Headers     map[string]string `json:"headers,omitempty"`
	Body        []byte            `json:"body"`
}

func (a *api) listMessages(w http.ResponseWriter, r *http.Request, queue string) error {
	q := query(r)
	n := defaultListed
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > gateway.MaxPeek {
			return fmt.Errorf("%w: n must be an integer from 1 to %d", gateway.ErrInvalid, gateway.MaxPeek)
		}
	}
	var withBody bool
	switch q.Get("body") {
	case "", "0", "false":
	case "1", "true":
		withBody = true
	default:
		return fmt.Errorf("%w: body must be 0, 1, true or false", gateway.ErrInvalid)
	}
	ps, err := a.core.Inspect.Messages(r.Context(), queue, n, withBody)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]waitingMessage, 0, len(ps))
	for _, p := range ps {
		m := waitingMessage{
			ID:          p.Seq,
			Priority:    p.Priority,
			Group:       strings.ToValidUTF8(p.Group, "\uFFFD"),
			ContentType: cmp.Or(p.ContentType, mapping.DefaultContentType),
			Headers:     keptMap(p.Kept),
			Delivered:   p.Delivered,
			Size:        p.Size,
			Object:      p.Object,
			Compound:    p.Compound,
			PartCount:   p.PartCount,
			PartsError:  p.PartsError,
			Body:        p.Body,
			Truncated:   p.Truncated,
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
		if p.Retry >= 0 {
			retry := p.Retry
			m.Retry = &retry
		}
		for _, part := range p.Parts {
			m.Parts = append(m.Parts, waitingPart{
				ContentType: cmp.Or(part.ContentType, mapping.DefaultContentType),
				Headers:     keptMap(part.Kept),
				Body:        part.Body,
			})
		}
		out = append(out, m)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode waiting messages: %w", err)
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (a *api) deleteMessage(w http.ResponseWriter, r *http.Request, queue string) error {
	seq, err := messageID(r)
	if err != nil {
		return err
	}
	if err := a.core.Inspect.DeleteMessage(r.Context(), queue, seq); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// moveMessage moves one waiting message to the queue ?to= names (created
// when it does not exist): 204, or 404 as deleteMessage. The token needs
// admin on the target too: the message is pushed there, the queue made.
func (a *api) moveMessage(w http.ResponseWriter, r *http.Request, queue string) error {
	seq, err := messageID(r)
	if err != nil {
		return err
	}
	target := r.URL.Query().Get("to")
	if target == "" {
		return fmt.Errorf("%w: ?to= must name the queue to move the message to", gateway.ErrInvalid)
	}
	if !auth.ScopeOf(r).Allows(target) {
		writeError(w, http.StatusForbidden, "token lacks \"admin\" on the target queue "+strconv.Quote(target))
		return nil
	}
	if err := a.core.Inspect.MoveMessage(r.Context(), queue, seq, target); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// messageID is the {id} of a waiting message's route.
func messageID(r *http.Request) (uint64, error) {
	v, err := url.PathUnescape(route.Var(r, "id"))
	if err != nil {
		return 0, fmt.Errorf("%w: message id", gateway.ErrInvalid)
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("%w: message id must be a positive integer (the id GET /queues/{name}/messages lists)", gateway.ErrInvalid)
	}
	return seq, nil
}

// keptMap renders kept headers; values read back from JetStream may be
// anything, and JSON must stay valid text.
func keptMap(hs []gateway.Header) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[strings.ToValidUTF8(h.Name, "\uFFFD")] = strings.ToValidUTF8(h.Value, "\uFFFD")
	}
	return m
}
