package sqs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// bodyContentType is the content-type of messages sent over SQS, which
// carries text: what LMQ clients are told.
const bodyContentType = "text/plain; charset=utf-8"

// maxBatch is SQS's largest batch.
const maxBatch = 10

func isNotFound(err error) bool { return errors.Is(err, gateway.ErrNotFound) }

// queueSettings are the metadata attributes sends and receives apply.
type queueSettings struct {
	delay, wait, maxSize int
	contentDedup         bool
	groupScope           bool
}

func (s *Server) settings(r *request) (queueSettings, error) {
	m, err := s.core.Queues.QueueMeta(r.ctx, r.queue)
	if err != nil {
		return queueSettings{}, err
	}
	atoi := func(k string, def int) int {
		if n, err := strconv.Atoi(m.Attrs[k]); err == nil {
			return n
		}
		return def
	}
	return queueSettings{
		delay:        atoi("DelaySeconds", 0),
		wait:         atoi("ReceiveMessageWaitTimeSeconds", 0),
		maxSize:      atoi("MaximumMessageSize", defaultMaxMessage),
		contentDedup: m.Attrs["ContentBasedDeduplication"] == "true",
		groupScope:   m.Attrs["DeduplicationScope"] == "messageGroup",
	}, nil
}

type sendOut struct {
	ID                           string `json:"Id,omitempty" xml:"Id,omitempty"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody" xml:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty" xml:"MD5OfMessageSystemAttributes,omitempty"`
	MessageID                    string `json:"MessageId" xml:"MessageId"`
	SequenceNumber               string `json:"SequenceNumber,omitempty" xml:"SequenceNumber,omitempty"`
}

// send stores one message of r's queue.
func (s *Server) send(r *request, qs queueSettings, e sendEntry) (sendOut, error) {
	if e.MessageBody == nil || *e.MessageBody == "" {
		return sendOut{}, errMissing("MessageBody")
	}
	body := *e.MessageBody
	size := len(body)
	for n, a := range e.MessageAttributes {
		if !validAttrName(n) || strings.HasPrefix(strings.ToLower(n), "aws.") || strings.HasPrefix(strings.ToLower(n), "amazon.") {
			return sendOut{}, errInvalid("The message attribute name '%s' is invalid.", n)
		}
		if err := a.check(n); err != nil {
			return sendOut{}, err
		}
		e.MessageAttributes[n] = a
		size += len(n) + len(a.DataType) + len(a.StringValue) + len(a.bin)
	}
	if len(e.MessageAttributes) > 10 {
		return sendOut{}, errInvalid("Number of message attributes [%d] exceeds the allowed maximum [10].", len(e.MessageAttributes))
	}
	for n, a := range e.MessageSystemAttributes {
		if n != "AWSTraceHeader" {
			return sendOut{}, errInvalid("Message system attribute name '%s' is invalid.", n)
		}
		if a.DataType != "String" {
			return sendOut{}, errInvalid("The message system attribute AWSTraceHeader must be of type String.")
		}
		if err := a.check(n); err != nil {
			return sendOut{}, err
		}
	}
	if size > qs.maxSize {
		return sendOut{}, errInvalid("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", qs.maxSize)
	}
	fifo := isFIFOName(r.queue)
	var opts gateway.PushOptions
	delay := qs.delay
	if e.DelaySeconds != nil {
		if *e.DelaySeconds < 0 || *e.DelaySeconds > maxDelaySeconds {
			return sendOut{}, errInvalid("Value %d for parameter DelaySeconds is invalid. Reason: must be from 0 to %d.", *e.DelaySeconds, maxDelaySeconds)
		}
		if fifo && *e.DelaySeconds > 0 {
			return sendOut{}, errInvalid("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", *e.DelaySeconds)
		}
		delay = *e.DelaySeconds
	}
	// SQS's character set for both ids, on either queue type (a standard
	// queue takes a MessageGroupId too, and ignores it here), checked
	// before anything is stored.
	if e.MessageGroupID != "" && !validMessageID(e.MessageGroupID) {
		return sendOut{}, errMessageID("MessageGroupId", e.MessageGroupID)
	}
	if e.MessageDeduplicationID != "" && !validMessageID(e.MessageDeduplicationID) {
		return sendOut{}, errMessageID("MessageDeduplicationId", e.MessageDeduplicationID)
	}
	dedup := e.MessageDeduplicationID
	if fifo {
		if e.MessageGroupID == "" {
			return sendOut{}, errMissing("MessageGroupId")
		}
		if dedup == "" {
			if !qs.contentDedup {
				return sendOut{}, errInvalid("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
			sum := sha256.Sum256([]byte(body))
			dedup = hex.EncodeToString(sum[:])
		}
		opts.Group = e.MessageGroupID
		// The core's idempotency window is per queue: a per-group scope is
		// a key naming the group too.
		if qs.groupScope {
			sum := sha256.Sum256([]byte(e.MessageGroupID + "\x00" + dedup))
			opts.IdempotencyKey = "g:" + hex.EncodeToString(sum[:])
		} else {
			opts.IdempotencyKey = "q:" + dedup
		}
		// Groups take no delay in the core: a FIFO queue's DelaySeconds
		// is not applied (docs/sqs.md).
		delay = 0
	} else if e.MessageDeduplicationID != "" {
		return sendOut{}, errInvalid("The request include parameter MessageDeduplicationId that is not valid for this queue type.")
	}
	opts.Delay = time.Duration(delay) * time.Second

	id := uuid.NewString()
	msg := gateway.Message{ContentType: bodyContentType, Body: []byte(body)}
	msg.Kept = append(msg.Kept, gateway.Header{Name: hdrMessageID, Value: id}, gateway.Header{Name: hdrSenderID, Value: r.sender})
	if fifo {
		msg.Kept = append(msg.Kept, gateway.Header{Name: hdrDedupID, Value: dedup})
	}
	for n, a := range e.MessageAttributes {
		msg.Kept = append(msg.Kept, gateway.Header{Name: hdrAttr + strings.ToLower(n), Value: encodeAttr(n, a)})
	}
	for n, a := range e.MessageSystemAttributes {
		msg.Kept = append(msg.Kept, gateway.Header{Name: hdrSys + strings.ToLower(n), Value: encodeAttr(n, a)})
	}
	seq, err := s.core.Messages.PushSeq(r.ctx, r.queue, msg, opts)
	if err != nil {
		return sendOut{}, err
	}
	out := sendOut{
		MD5OfMessageBody:             md5Hex(msg.Body),
		MD5OfMessageAttributes:       md5OfAttributes(e.MessageAttributes),
		MD5OfMessageSystemAttributes: md5OfAttributes(e.MessageSystemAttributes),
		MessageID:                    id,
	}
	if fifo {
		out.SequenceNumber = strconv.FormatUint(seq, 10)
	}
	return out, nil
}

func (s *Server) sendMessage(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	qs, err := s.settings(r)
	if err != nil {
		return nil, err
	}
	return s.send(r, qs, r.sendEntry)
}

// errMessageID refuses a MessageGroupId or MessageDeduplicationId outside
// SQS's character set or length, quoting it (it may hold any byte; a long
// one is cut).
func errMessageID(param, v string) *apiError {
	if len(v) > 130 {
		v = v[:128] + "…"
	}
	return errInvalid("Value %q for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to 128 in length.",
		v, param, param)
}

// batchError is a failed entry of a batch.
type batchError struct {
	ID          string `json:"Id" xml:"Id"`
	SenderFault bool   `json:"SenderFault" xml:"SenderFault"`
	Code        string `json:"Code" xml:"Code"`
	Message     string `json:"Message,omitempty" xml:"Message,omitempty"`
}

func entryError(id string, err error) batchError {
	ae := apiErrorOf(err)
	return batchError{ID: id, SenderFault: ae.sender(), Code: ae.Code, Message: ae.Message}
}

// checkBatch validates a batch's entries: 1 to 10, ids valid and distinct.
func checkBatch(entries []batchEntry) error {
	if len(entries) == 0 {
		return errBatch("EmptyBatchRequest", "There should be at least one entry in the request.")
	}
	if len(entries) > maxBatch {
		return errBatch("TooManyEntriesInBatchRequest", "Maximum number of entries per request are %d. You have sent %d.", maxBatch, len(entries))
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.ID == "" || len(e.ID) > 80 || strings.Trim(e.ID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return errBatch("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[e.ID] {
			return errBatch("BatchEntryIdsNotDistinct", "Id %s repeated.", e.ID)
		}
		seen[e.ID] = true
	}
	return nil
}

type sendBatchOut struct {
	Successful []sendOut    `json:"Successful" xml:"SendMessageBatchResultEntry"`
	Failed     []batchError `json:"Failed" xml:"BatchResultErrorEntry"`
}

func (s *Server) sendMessageBatch(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	if err := checkBatch(r.Entries); err != nil {
		return nil, err
	}
	qs, err := s.settings(r)
	if err != nil {
		return nil, err
	}
	out := sendBatchOut{Successful: []sendOut{}, Failed: []batchError{}}
	for _, e := range r.Entries {
		res, err := s.send(r, qs, e.sendEntry)
		if err != nil {
			out.Failed = append(out.Failed, entryError(e.ID, err))
			continue
		}
		res.ID = e.ID
		out.Successful = append(out.Successful, res)
	}
	return out, nil
}

type messageOut struct {
	MessageID              string     `json:"MessageId" xml:"MessageId"`
	ReceiptHandle          string     `json:"ReceiptHandle" xml:"ReceiptHandle"`
	MD5OfBody              string     `json:"MD5OfBody" xml:"MD5OfBody"`
	Body                   string     `json:"Body" xml:"Body"`
	Attributes             attrMap    `json:"Attributes,omitempty" xml:"Attribute"`
	MD5OfMessageAttributes string     `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      msgAttrMap `json:"MessageAttributes,omitempty" xml:"MessageAttribute"`
}

type receiveOut struct {
	Messages []messageOut `json:"Messages,omitempty" xml:"Message"`
}

func (s *Server) receiveMessage(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	qs, err := s.settings(r)
	if err != nil {
		return nil, err
	}
	n := 1
	if r.MaxNumberOfMessages != nil {
		n = *r.MaxNumberOfMessages
		if n < 1 || n > maxBatch {
			return nil, errInvalid("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10.", n)
		}
	}
	wait := qs.wait
	if r.WaitTimeSeconds != nil {
		wait = *r.WaitTimeSeconds
		if wait < 0 || wait > maxWaitSeconds {
			return nil, errInvalid("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20.", wait)
		}
	}
	if r.VisibilityTimeout != nil && (*r.VisibilityTimeout < 0 || *r.VisibilityTimeout > maxVisibility) {
		return nil, errInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be from 0 to %d.", *r.VisibilityTimeout, maxVisibility)
	}
	var got []*gateway.Delivery
	// The deliveries record who has them (the console's in-flight list).
	pctx := gateway.WithClient(r.ctx, gateway.ClientSQS, r.remote)
	d, err := s.core.Messages.Pull(pctx, r.queue, time.Duration(wait)*time.Second)
	for err == nil && d != nil {
		got = append(got, d)
		if len(got) == n {
			break
		}
		d, err = s.core.Messages.Pull(pctx, r.queue, 0)
	}
	if err != nil && len(got) == 0 {
		if r.ctx.Err() != nil {
			return receiveOut{}, nil // the client left
		}
		return nil, err
	}
	if r.VisibilityTimeout != nil {
		vt := time.Duration(*r.VisibilityTimeout) * time.Second
		for _, d := range got {
			if err := s.core.Messages.SetVisibility(r.ctx, r.queue, d.ID, vt); err != nil {
				s.log.Warn("sqs: could not set a received message's visibility", "queue", r.queue, "err", err)
			}
		}
	}
	sysNames := names(append(r.AttributeNames, r.MessageSystemAttributeNames...))
	out := receiveOut{}
	for _, d := range got {
		out.Messages = append(out.Messages, s.messageOf(r, d, sysNames))
	}
	return out, nil
}

// names is the set of names asked for; nil for none, "All" for every one.
func names(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]bool, len(list))
	for _, n := range list {
		m[n] = true
	}
	return m
}

// wantAttr reports whether attribute n is asked for by MessageAttributeNames
// (All, .*, a name, or a prefix "Name.*").
func wantAttr(list []string, n string) bool {
	for _, w := range list {
		if w == "All" || w == ".*" || w == n {
			return true
		}
		if p, ok := strings.CutSuffix(w, ".*"); ok && strings.HasPrefix(n, p+".") {
			return true
		}
	}
	return false
}

// messageOf is a delivery as SQS hands it out.
func (s *Server) messageOf(r *request, d *gateway.Delivery, sys map[string]bool) messageOut {
	st := readKept(r.queue, d)
	body := validUTF8(d.Message.Body)
	m := messageOut{
		MessageID:     st.messageID,
		ReceiptHandle: d.ID,
		MD5OfBody:     md5Hex([]byte(body)),
		Body:          body,
	}
	if len(sys) > 0 {
		all := sys["All"]
		a := attrMap{}
		put := func(name, v string) {
			if v != "" && (all || sys[name]) {
				a[name] = v
			}
		}
		ms := func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return strconv.FormatInt(t.UnixMilli(), 10)
		}
		sender := st.senderID
		if sender == "" {
			sender = s.opts.Account
		}
		put("SenderId", sender)
		put("SentTimestamp", ms(d.PushedAt))
		put("ApproximateReceiveCount", strconv.Itoa(max(d.Receives, 1)))
		put("ApproximateFirstReceiveTimestamp", ms(d.FirstReceivedAt))
		if isFIFOName(r.queue) {
			put("MessageGroupId", d.Group)
			put("MessageDeduplicationId", st.dedupID)
			put("SequenceNumber", strconv.FormatUint(d.Seq, 10))
		}
		if t, ok := st.sys["AWSTraceHeader"]; ok {
			put("AWSTraceHeader", t.StringValue)
		}
		if len(a) > 0 {
			m.Attributes = a
		}
	}
	if len(st.attrs) > 0 && len(r.MessageAttributeNames) > 0 {
		ma := msgAttrMap{}
		for n, a := range st.attrs {
			if wantAttr(r.MessageAttributeNames, n) {
				ma[n] = a
			}
		}
		if len(ma) > 0 {
			m.MessageAttributes = ma
			m.MD5OfMessageAttributes = md5OfAttributes(ma)
		}
	}
	return m
}

// receipt checks a receipt handle's format: a delivery id.
func receipt(h string) error {
	if h == "" {
		return errMissing("ReceiptHandle")
	}
	if _, err := uuid.Parse(h); err != nil {
		return errReceipt(h)
	}
	return nil
}

// remove deletes the message of a receipt handle. As SQS does, a handle
// of the right format that is no longer valid (expired, deleted) succeeds.
func (s *Server) remove(r *request, h string) error {
	if err := receipt(h); err != nil {
		return err
	}
	err := s.core.Messages.Reply(r.ctx, r.queue, h, gateway.Ack)
	if err != nil && isNotFound(err) {
		if err := s.mustExist(r.ctx, r.queue); err != nil {
			return err
		}
		return nil
	}
	return err
}

func (s *Server) deleteMessage(r *request) (any, error) {
	return nil, s.remove(r, r.ReceiptHandle)
}

type idOut struct {
	ID string `json:"Id" xml:"Id"`
}

type deleteBatchOut struct {
	Successful []idOut      `json:"Successful" xml:"DeleteMessageBatchResultEntry"`
	Failed     []batchError `json:"Failed" xml:"BatchResultErrorEntry"`
}

func (s *Server) deleteMessageBatch(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	if err := checkBatch(r.Entries); err != nil {
		return nil, err
	}
	out := deleteBatchOut{Successful: []idOut{}, Failed: []batchError{}}
	for _, e := range r.Entries {
		if err := s.remove(r, e.ReceiptHandle); err != nil {
			out.Failed = append(out.Failed, entryError(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, idOut{e.ID})
	}
	return out, nil
}

// visibility changes the time left of a receipt handle's delivery.
func (s *Server) visibility(r *request, h string, vt *int) error {
	if err := receipt(h); err != nil {
		return err
	}
	if vt == nil {
		return errMissing("VisibilityTimeout")
	}
	if *vt < 0 || *vt > maxVisibility {
		return errInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be from 0 to %d.", *vt, maxVisibility)
	}
	err := s.core.Messages.SetVisibility(r.ctx, r.queue, h, time.Duration(*vt)*time.Second)
	if err != nil && isNotFound(err) {
		if err := s.mustExist(r.ctx, r.queue); err != nil {
			return err
		}
		return errNotInflight()
	}
	return err
}

func (s *Server) changeVisibility(r *request) (any, error) {
	return nil, s.visibility(r, r.ReceiptHandle, r.VisibilityTimeout)
}

type changeBatchOut struct {
	Successful []idOut      `json:"Successful" xml:"ChangeMessageVisibilityBatchResultEntry"`
	Failed     []batchError `json:"Failed" xml:"BatchResultErrorEntry"`
}

func (s *Server) changeVisibilityBatch(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	if err := checkBatch(r.Entries); err != nil {
		return nil, err
	}
	out := changeBatchOut{Successful: []idOut{}, Failed: []batchError{}}
	for _, e := range r.Entries {
		if err := s.visibility(r, e.ReceiptHandle, e.VisibilityTimeout); err != nil {
			out.Failed = append(out.Failed, entryError(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, idOut{e.ID})
	}
	return out, nil
}

// validUTF8 is b as an SQS body can carry it: a message pushed over LMQ or
// NATS may hold any bytes, and SQS bodies are text. Each byte that is not
// part of valid UTF-8 becomes U+FFFD, as the JSON encoder would make it,
// so that MD5OfBody is of the body the client gets (SDKs check it).
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}
