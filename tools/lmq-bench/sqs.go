package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// sqsTarget drives the gateway's Amazon SQS API in the AWS JSON 1.0
// protocol (what current SDKs speak), by hand: POST / with X-Amz-Target
// AmazonSQS.<Action>. No AWS SDK: the bench measures the server, and the
// requests are unsigned, as a gateway without authentication accepts them.
type sqsTarget struct {
	// base is http://host:port; queue URLs are base/account/name.
	base    string
	account string
	hc      *http.Client
}

// sqsDefaultAccount is the account id of the gateway's queue URLs unless
// --sqs-account says otherwise.
const sqsDefaultAccount = "000000000000"

// sqsMaxWait is SQS's longest WaitTimeSeconds.
const sqsMaxWait = 20 * time.Second

func newSQSTarget(addr, account string, maxConc int) *sqsTarget {
	return &sqsTarget{base: "http://" + addr, account: account, hc: newHTTPClient(maxConc)}
}

func (t *sqsTarget) name() string   { return tSQS }
func (t *sqsTarget) depth() int     { return 1 }
func (t *sqsTarget) stateful() bool { return true }

func (t *sqsTarget) close() error {
	t.hc.CloseIdleConnections()
	return nil
}

func (t *sqsTarget) queueURL(queue string) string { return t.base + "/" + t.account + "/" + queue }

func (t *sqsTarget) newClient(context.Context) (client, error) { return &sqsClient{t: t}, nil }

// setup creates the queue (CreateQueue; SQS's pulls do not create) and
// checks that it is empty.
func (t *sqsTarget) setup(ctx context.Context, queue string) error {
	c := &sqsClient{t: t}
	var out struct{ QueueUrl string }
	if err := c.call(ctx, "CreateQueue", map[string]string{"QueueName": queue}, &out); err != nil {
		return fmt.Errorf("setup %s: %w", queue, err)
	}
	if out.QueueUrl == "" {
		return fmt.Errorf("setup %s: CreateQueue answered no QueueUrl", queue)
	}
	return createByPull(ctx, c, queue)
}

func (t *sqsTarget) remove(ctx context.Context, queue string) error {
	c := &sqsClient{t: t}
	err := c.call(ctx, "DeleteQueue", map[string]string{"QueueUrl": t.queueURL(queue)}, nil)
	var se *sqsError
	if errors.As(err, &se) && se.isNoQueue() {
		return nil // already gone: not a failure here
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", queue, err)
	}
	return nil
}

// sqsClient is one bench client. Its buffers are reused: req for request
// bodies, buf for answers, decoded for the body of the last message pulled.
type sqsClient struct {
	t       *sqsTarget
	req     bytes.Buffer
	buf     bytes.Buffer
	decoded []byte
}

func (c *sqsClient) close() error { return nil }

// sqsError is an error answer of the SQS API: JSON 1.0's {"__type":
// "...#Code", "message": "..."} (also "Message"), with its HTTP status.
type sqsError struct {
	action  string
	status  int
	code    string
	message string
}

func (e *sqsError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s: %s", e.action, e.status, e.code, e.message)
}

// isNoQueue: the queue does not exist (AWS.SimpleQueueService.NonExistentQueue
// in the query protocol, QueueDoesNotExist in JSON).
func (e *sqsError) isNoQueue() bool {
	return strings.Contains(e.code, "QueueDoesNotExist") || strings.Contains(e.code, "NonExistentQueue")
}

// call performs one action: in, encoded as JSON, is the request; the answer
// is decoded into out (nil: discarded).
func (c *sqsClient) call(ctx context.Context, action string, in, out any) error {
	c.req.Reset()
	if err := json.NewEncoder(&c.req).Encode(in); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.t.base+"/", bytes.NewReader(c.req.Bytes()))
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	resp, err := c.t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	b, err := drain(resp.Body, &c.buf)
	if err != nil {
		return fmt.Errorf("%s: reading answer: %w", action, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
			Msg2    string `json:"Message"`
		}
		if json.Unmarshal(b, &e) != nil || e.Type == "" {
			return &errStatus{op: action, status: resp.StatusCode, body: snippet(b)}
		}
		return &sqsError{action: action, status: resp.StatusCode, code: e.Type, message: e.Message + e.Msg2}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: answer: %w", action, err)
	}
	return nil
}

func (c *sqsClient) push(ctx context.Context, queue string, body []byte) error {
	text, err := sqsEncodeBody(body)
	if err != nil {
		return err
	}
	var out struct{ MessageId string }
	if err := c.call(ctx, "SendMessage", struct {
		QueueUrl    string
		MessageBody string
	}{c.t.queueURL(queue), text}, &out); err != nil {
		return err
	}
	if out.MessageId == "" {
		return errors.New("SendMessage: answer without MessageId")
	}
	return nil
}

// sqsWaitSeconds is wait as SQS's WaitTimeSeconds, which counts whole
// seconds: rounded up (a wait of 100 ms waits up to a second when no
// message comes, never less than asked), at most 20.
func sqsWaitSeconds(wait time.Duration) int {
	if wait <= 0 {
		return 0
	}
	return int(math.Ceil(min(wait, sqsMaxWait).Seconds()))
}

func (c *sqsClient) pull(ctx context.Context, queue string, wait time.Duration) ([]byte, func(context.Context) error, error) {
	var out struct {
		Messages []struct {
			MessageId     string
			ReceiptHandle string
			Body          string
		}
	}
	if err := c.call(ctx, "ReceiveMessage", struct {
		QueueUrl            string
		MaxNumberOfMessages int
		WaitTimeSeconds     int
	}{c.t.queueURL(queue), 1, sqsWaitSeconds(wait)}, &out); err != nil {
		return nil, nil, err
	}
	switch len(out.Messages) {
	case 0:
		return nil, nil, nil
	case 1:
	default:
		return nil, nil, fmt.Errorf("ReceiveMessage: %d messages for MaxNumberOfMessages 1", len(out.Messages))
	}
	m := out.Messages[0]
	if m.ReceiptHandle == "" {
		return nil, nil, errors.New("ReceiveMessage: message without ReceiptHandle")
	}
	body, err := sqsDecodeBody(m.Body, c.decoded[:0])
	if err != nil {
		return nil, nil, err
	}
	c.decoded = body
	qurl, handle := c.t.queueURL(queue), m.ReceiptHandle
	ack := func(ctx context.Context) error {
		// The pulled body is in c.decoded, which the call leaves intact.
		return c.call(ctx, "DeleteMessage", map[string]string{"QueueUrl": qurl, "ReceiptHandle": handle}, nil)
	}
	return body, ack, nil
}

// The bench's bodies start with an 8-byte binary push time (stamp), which
// SQS's message text cannot carry (it allows no NUL and no invalid UTF-8).
// The SQS target sends the stamp as 16 hex digits followed by the rest of
// the body: 8 bytes more per message than the other targets.
const sqsStampHex = 2 * tsLen

func sqsEncodeBody(body []byte) (string, error) {
	if len(body) < tsLen {
		return "", fmt.Errorf("SendMessage: body of %d bytes, shorter than its %d-byte stamp", len(body), tsLen)
	}
	rest := body[tsLen:]
	if !utf8.Valid(rest) || bytes.IndexByte(rest, 0) >= 0 {
		return "", errors.New("SendMessage: body is not text SQS can carry")
	}
	var b strings.Builder
	b.Grow(sqsStampHex + len(rest))
	b.WriteString(hex.EncodeToString(body[:tsLen]))
	b.Write(rest)
	return b.String(), nil
}

// sqsDecodeBody undoes sqsEncodeBody into dst.
func sqsDecodeBody(text string, dst []byte) ([]byte, error) {
	if len(text) < sqsStampHex {
		return nil, fmt.Errorf("ReceiveMessage: body of %d bytes, shorter than its stamp", len(text))
	}
	var stampBytes [tsLen]byte
	if _, err := hex.Decode(stampBytes[:], []byte(text[:sqsStampHex])); err != nil {
		return nil, fmt.Errorf("ReceiveMessage: body's stamp: %w", err)
	}
	dst = append(dst, stampBytes[:]...)
	return append(dst, text[sqsStampHex:]...), nil
}
