package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Batches (beyond LMQ): POST /messages/{name}?batch=1 stores several
// messages at once.

// pushBatch stores the messages of a ?batch=1 body atomically: a
// multipart/mixed body (one message per part, with its content-type) or an
// application/x-msgpack array of [{header: value}, content] pairs (the form of
// a compound message).
func (a *api) pushBatch(w http.ResponseWriter, r *http.Request, queue string) error {
	if query(r).Get("priority") != "" {
		// A batch takes the queue's priority property; refused rather than
		// ignored, so that nobody believes it was applied.
		return fmt.Errorf("%w: priority is not available with batch (a batch takes the queue's priority property)", gateway.ErrInvalid)
	}
	if _, ok := query(r)["group"]; ok {
		return fmt.Errorf("%w: group is not available with batch", gateway.ErrInvalid)
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	msgs, err := parseBatch(r.Header.Get("Content-Type"), body)
	if err != nil {
		return err
	}
	if err := a.core.Messages.PushBatch(r.Context(), queue, msgs); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"accum":"no","count":`+strconv.Itoa(len(msgs))+`}`))
	return nil
}

// parseBatch reads a batch body. Its memory follows the body: the MessagePack
// reader checks every declared count against the bytes present, and parts are
// counted as they are read, so a body with more than gateway.MaxBatch
// messages is refused at the first one too many. A batch that holds no
// message (also a multipart body whose boundary never occurs) is refused.
func parseBatch(contentType string, body []byte) ([]gateway.Message, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: batch content-type: %w", gateway.ErrInvalid, err)
	}
	var msgs []gateway.Message
	switch {
	case mt == mapping.ContentTypeMsgpack:
		if msgs, err = gateway.DecodeCompound(body, gateway.MaxBatch); err != nil {
			return nil, fmt.Errorf("%w: batch body: %w", gateway.ErrInvalid, err)
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("%w: batch body holds no message", gateway.ErrInvalid)
		}
		return msgs, nil
	case strings.HasPrefix(mt, "multipart/"):
		boundary := params["boundary"]
		if boundary == "" {
			return nil, fmt.Errorf("%w: batch content-type %s has no boundary", gateway.ErrInvalid, mt)
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for {
			p, err := mr.NextRawPart()
			// Only the closing boundary ends the parts with a bare io.EOF; a
			// body cut before it gives a wrapped one, and is refused.
			if err == io.EOF { //nolint:errorlint // see above
				break
			}
			if errors.Is(err, io.EOF) {
				if len(msgs) == 0 {
					return nil, fmt.Errorf("%w: batch body: no part; the boundary of the content-type does not occur in it", gateway.ErrInvalid)
				}
				return nil, fmt.Errorf("%w: batch body ends after part %d without the closing boundary", gateway.ErrInvalid, len(msgs))
			}
			if err != nil {
				return nil, fmt.Errorf("%w: batch body: part %d: %w", gateway.ErrInvalid, len(msgs)+1, err)
			}
			if len(msgs) == gateway.MaxBatch {
				return nil, fmt.Errorf("%w: a batch holds at most %d messages", gateway.ErrInvalid, gateway.MaxBatch)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, fmt.Errorf("%w: batch body: part %d: %w", gateway.ErrInvalid, len(msgs)+1, err)
			}
			msgs = append(msgs, gateway.Message{ContentType: p.Header.Get("Content-Type"), Body: b})
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("%w: batch body holds no message", gateway.ErrInvalid)
		}
		return msgs, nil
	}
	return nil, fmt.Errorf("%w: a batch is multipart/mixed or %s", gateway.ErrInvalid, mapping.ContentTypeMsgpack)
}
