package httpapi

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// LMQ's response headers, written in LMQ's lowercase spelling. (Content-Type
// keeps Go's canonical key: net/http consults it and would otherwise add a
// second one.)
const (
	hdrQueueName      = "x-lmq-queue-name"
	hdrMessageID      = "x-lmq-message-id"
	hdrMessageType    = "x-lmq-message-type"
	hdrRetryRemaining = "x-lmq-retry-remaining"
	// hdrPriority (beyond LMQ) is set only on messages of a priority above 0.
	hdrPriority = "x-lmq-priority"
	// hdrGroup (beyond LMQ) names the ordered group of a message in one.
	hdrGroup = "x-lmq-group"
)

func contentTypeOf(m gateway.Message) string {
	if m.ContentType == "" {
		return mapping.DefaultContentType
	}
	return m.ContentType
}

// bodyHeaders are set on every answer whose body is a message's bytes (a
// pull, a dead letter). Those bytes are whatever a producer pushed, with the
// content type it chose: a text/html body opened in a browser (a pull's URL
// in a link) would otherwise render, and run its script, as a page of the
// gateway's origin, where the console and the browser's saved credentials
// are. nosniff keeps the browser to the stated type; "sandbox" makes even a
// page of that type a unique opaque origin without script. Clients that are
// not browsers ignore both.
func bodyHeaders(h http.Header) {
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Content-Security-Policy"] = []string{"sandbox"}
}

// writeDelivery writes a delivered message in LMQ's HTTP form.
func writeDelivery(w http.ResponseWriter, d *gateway.Delivery, cf string) error {
	h := w.Header()
	bodyHeaders(h)
	h[hdrQueueName] = []string{d.Queue}
	h[hdrMessageID] = []string{d.ID}
	h[hdrRetryRemaining] = []string{strconv.Itoa(d.RetryRemaining)}
	if d.Priority > 0 {
		h[hdrPriority] = []string{strconv.Itoa(d.Priority)}
	}
	if d.Group != "" {
		h[hdrGroup] = []string{d.Group}
	}
	var body []byte
	if !d.Compound {
		h[hdrMessageType] = []string{"normal"}
		for _, k := range d.Message.Kept {
			h[k.Name] = append(h[k.Name], k.Value)
		}
		h.Set("Content-Type", contentTypeOf(d.Message))
		body = d.Message.Body
	} else {
		h[hdrMessageType] = []string{"compound"}
		var err error
		if cf == "msgpack" {
			h.Set("Content-Type", mapping.ContentTypeMsgpack)
			body, err = compoundMsgpack(d.Parts)
		} else {
			h.Set("Content-Type", "multipart/mixed; boundary="+d.ID)
			body = compoundMultipart(d.ID, d.Parts)
		}
		if err != nil {
			return err
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	return err
}

// compoundMultipart renders LMQ's multipart/mixed body: for each part
// "\r\n--ID\r\n", its headers (content-type first), the transfer encoding, a
// blank line and the bytes; closed by "\r\n--ID--\r\n".
func compoundMultipart(id string, parts []gateway.Message) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString("\r\n--" + id + "\r\n")
		b.WriteString("content-type: " + contentTypeOf(p) + "\r\n")
		for _, k := range p.Kept {
			b.WriteString(k.Name + ": " + k.Value + "\r\n")
		}
		b.WriteString("content-transfer-encoding: binary\r\n\r\n")
		b.Write(p.Body)
	}
	b.WriteString("\r\n--" + id + "--\r\n")
	return b.Bytes()
}

// compoundMsgpack renders LMQ's cf=msgpack body: an array of
// [{header: value, ...}, content] pairs, metadata as str and content as
// bin, which is the compound format (mapping.EncodeCompound) of the parts
// with their content types (the default when none was given).
func compoundMsgpack(parts []gateway.Message) ([]byte, error) {
	ps := make([]mapping.Part, len(parts))
	for i, p := range parts {
		ps[i] = mapping.Part{ContentType: contentTypeOf(p), Body: p.Body, Kept: p.Kept}
	}
	return mapping.EncodeCompound(ps)
}
