package e2e

// The SQS API (--sqs-listen) driven by the official AWS SDK for Go v2, and
// by hand in the query protocol.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// startSQS starts a gateway with the SQS API and returns an SDK client of it.
func startSQS(t *testing.T, extraArgs ...string) (*Gateway, *sqs.Client) {
	t.Helper()
	gw := Start(t, append([]string{"--sqs-listen", anyPort}, extraArgs...)...)
	return gw, sqsClient(gw)
}

func sqsClient(gw *Gateway) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + gw.Bound.SQS),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	})
}

// apiCode is the error code of an SDK error ("" for none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// must takes an SDK call's two results and returns a function that gives
// back the value, or fails the test (t.Fatal, on the test's goroutine) on
// an error: must(c.SendMessage(ctx, in))(t)(t). (The SDK's calls return two
// values, which a helper taking t as well cannot take inline; a panic would
// end the whole e2e binary, every other test with it.)
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("SDK call: %v", err)
		}
		return v
	}
}

func TestSQSQueuesAndMessages(t *testing.T) {
	t.Parallel()
	gw, c := startSQS(t)
	ctx := context.Background()

	cq := must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"),
		Attributes: map[string]string{"VisibilityTimeout": "60"}, Tags: map[string]string{"team": "a"}}))(t)
	url := aws.ToString(cq.QueueUrl)
	if want := "http://" + gw.Bound.SQS + "/000000000000/jobs"; url != want {
		t.Fatalf("QueueUrl %s, want %s", url, want)
	}
	// The same again is fine; other attributes are not.
	must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "60"}}))(t)
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "61"}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		t.Fatalf("create with other attributes: %v, want QueueNameExists", err)
	}
	gu := must(c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")}))(t)
	if aws.ToString(gu.QueueUrl) != url {
		t.Fatalf("GetQueueUrl %s", aws.ToString(gu.QueueUrl))
	}
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var dne *types.QueueDoesNotExist
	if !errors.As(err, &dne) || apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("GetQueueUrl of a missing queue: %v (%s)", err, apiCode(err))
	}
	tags := must(c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url}))(t)
	if tags.Tags["team"] != "a" {
		t.Fatalf("tags %v", tags.Tags)
	}
	must(c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"env": "dev"}}))(t)
	must(c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"team"}}))(t)
	tags = must(c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url}))(t)
	if len(tags.Tags) != 1 || tags.Tags["env"] != "dev" {
		t.Fatalf("tags %v", tags.Tags)
	}

	sent := must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"Color": {DataType: aws.String("String"), StringValue: aws.String("red")},
			"Blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
			"N":     {DataType: aws.String("Number.int"), StringValue: aws.String("42")},
		}}))(t)
	if aws.ToString(sent.MD5OfMessageBody) != "5d41402abc4b2a76b9719d911017c592" {
		t.Fatalf("MD5OfMessageBody %s", aws.ToString(sent.MD5OfMessageBody))
	}
	attrs := must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}}))(t)
	if attrs.Attributes["ApproximateNumberOfMessages"] != "1" || attrs.Attributes["VisibilityTimeout"] != "60" ||
		attrs.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:000000000000:jobs" {
		t.Fatalf("attributes %v", attrs.Attributes)
	}

	rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}}))(t)
	if len(rm.Messages) != 1 {
		t.Fatalf("received %d messages", len(rm.Messages))
	}
	m := rm.Messages[0]
	if aws.ToString(m.Body) != "hello" || aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) ||
		aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) {
		t.Fatalf("message %+v, sent %+v", m, sent)
	}
	if string(m.MessageAttributes["Blob"].BinaryValue) != "\x00\x01\x02" || aws.ToString(m.MessageAttributes["Color"].StringValue) != "red" {
		t.Fatalf("attributes %+v", m.MessageAttributes)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" || m.Attributes["SenderId"] != "AKIDEXAMPLE" {
		t.Fatalf("system attributes %v", m.Attributes)
	}
	// Visible again at once, received a second time.
	must(c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}))(t)
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}}))(t)
	if len(rm.Messages) != 1 || rm.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after a change to 0: %+v", rm.Messages)
	}
	h := rm.Messages[0].ReceiptHandle
	// The old handle: no longer in flight.
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 10})
	if !errors.As(err, new(*types.MessageNotInflight)) {
		t.Fatalf("change of a stale handle: %v", err)
	}
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: h}))(t)
	// Deleting again succeeds, as in SQS; a malformed handle does not.
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: h}))(t)
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("junk")})
	if !errors.As(err, new(*types.ReceiptHandleIsInvalid)) {
		t.Fatalf("delete with a malformed handle: %v", err)
	}
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t)
	if len(rm.Messages) != 0 {
		t.Fatalf("after delete: %+v", rm.Messages)
	}

	// Delays, purge, list, delete.
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("later"), DelaySeconds: 1}))(t)
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t)
	if len(rm.Messages) != 0 {
		t.Fatal("a delayed message came at once")
	}
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20}))(t)
	if len(rm.Messages) != 1 || aws.ToString(rm.Messages[0].Body) != "later" {
		t.Fatalf("long poll for the delayed message: %+v", rm.Messages)
	}
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")}))(t)
	must(c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}))(t)
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t)
	if len(rm.Messages) != 0 {
		t.Fatal("a message after purge")
	}
	for _, n := range []string{"other-1", "other-2"} {
		must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n)}))(t)
	}
	lq := must(c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("other"), MaxResults: aws.Int32(1)}))(t)
	if len(lq.QueueUrls) != 1 || lq.NextToken == nil {
		t.Fatalf("first page %+v", lq)
	}
	lq = must(c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("other"), MaxResults: aws.Int32(1), NextToken: lq.NextToken}))(t)
	if len(lq.QueueUrls) != 1 || !strings.HasSuffix(lq.QueueUrls[0], "/other-2") {
		t.Fatalf("second page %+v", lq)
	}
	must(c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url}))(t)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	if !errors.As(err, &dne) {
		t.Fatalf("send to a deleted queue: %v", err)
	}
	_, err = c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:jobs")})
	if !errors.As(err, new(*types.UnsupportedOperation)) {
		t.Fatalf("an unsupported action: %v", err)
	}
}

// sqsRounds bounds the receives of a loop that waits for messages (each
// waits up to 5 s for one): a message that never comes fails the test
// instead of keeping it in the loop.
const sqsRounds = 12

// sqsReceiveCounts is the receive attribute a loop asks for.
var sqsReceiveCounts = []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}

// sqsHold receives from url, holding what it gets for 60 s, until it holds
// a delivery of every one of bodies (each body's latest), and fails the
// test after sqsRounds receives without that.
func sqsHold(t *testing.T, c *sqs.Client, url string, bodies []string) map[string]types.Message {
	t.Helper()
	held := map[string]types.Message{}
	for range sqsRounds {
		rm := must(c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 5, VisibilityTimeout: 60, MessageSystemAttributeNames: sqsReceiveCounts}))(t)
		for _, m := range rm.Messages {
			held[aws.ToString(m.Body)] = m
		}
		if len(held) == len(bodies) {
			return held
		}
	}
	t.Fatalf("after %d receives, held %d of %v", sqsRounds, len(held), bodies)
	return nil
}

func TestSQSBatchesAndVisibility(t *testing.T) {
	t.Parallel()
	_, c := startSQS(t)
	ctx := context.Background()
	url := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("b"),
		Attributes: map[string]string{"VisibilityTimeout": "1"}}))(t).QueueUrl)
	var entries []types.SendMessageBatchRequestEntry
	var bodies []string
	for i := range 4 {
		bodies = append(bodies, fmt.Sprint("m", i))
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(bodies[i])})
	}
	entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("bad"), MessageBody: aws.String("x"), DelaySeconds: 901})
	sb := must(c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}))(t)
	if len(sb.Successful) != 4 || len(sb.Failed) != 1 || aws.ToString(sb.Failed[0].Id) != "bad" || !sb.Failed[0].SenderFault {
		t.Fatalf("batch send: %+v", sb)
	}
	// A receive that names no visibility timeout takes the queue's (1 s):
	// what it got comes back, and is received again.
	rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 5}))(t)
	if len(rm.Messages) == 0 {
		t.Fatal("nothing received")
	}
	first := map[string]bool{}
	for _, m := range rm.Messages {
		first[aws.ToString(m.Body)] = true
	}
	// All four held for 60 s: the first ones only once they came back.
	held := sqsHold(t, c, url, bodies)
	wantCounts := func(held map[string]types.Message, firstN, restN int) {
		t.Helper()
		for b, m := range held {
			want := restN
			if first[b] {
				want = firstN
			}
			if got := m.Attributes["ApproximateReceiveCount"]; got != fmt.Sprint(want) {
				t.Errorf("%s (first received: %v): ApproximateReceiveCount %s, want %d", b, first[b], got, want)
			}
		}
	}
	wantCounts(held, 2, 1)

	// Visible again at once, in one batch whose stale entry fails alone:
	// all four are received again.
	var ch []types.ChangeMessageVisibilityBatchRequestEntry
	for i, b := range bodies {
		ch = append(ch, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(fmt.Sprint("c", i)), ReceiptHandle: held[b].ReceiptHandle, VisibilityTimeout: 0})
	}
	ch = append(ch, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String("junk"), ReceiptHandle: aws.String("not-a-handle"), VisibilityTimeout: 0})
	cb := must(c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: ch}))(t)
	if len(cb.Successful) != 4 || len(cb.Failed) != 1 || aws.ToString(cb.Failed[0].Id) != "junk" || aws.ToString(cb.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Fatalf("batch visibility change: %+v", cb)
	}
	again := sqsHold(t, c, url, bodies)
	wantCounts(again, 3, 2)

	// Deleted in one batch, with one stale entry: only that one fails, and
	// nothing is left.
	var del []types.DeleteMessageBatchRequestEntry
	for i, b := range bodies {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", i)), ReceiptHandle: again[b].ReceiptHandle})
	}
	del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String("junk"), ReceiptHandle: aws.String("not-a-handle")})
	db := must(c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del}))(t)
	if len(db.Successful) != 4 || len(db.Failed) != 1 || aws.ToString(db.Failed[0].Id) != "junk" || aws.ToString(db.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Fatalf("batch delete: %+v", db)
	}
	if rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t); len(rm.Messages) != 0 {
		t.Fatalf("after the batch delete: %+v", rm.Messages)
	}

	_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("1")}, {Id: aws.String("a"), MessageBody: aws.String("2")}}})
	if !errors.As(err, new(*types.BatchEntryIdsNotDistinct)) {
		t.Fatalf("repeated ids: %v", err)
	}
}

func TestSQSFIFO(t *testing.T) {
	t.Parallel()
	_, c := startSQS(t)
	ctx := context.Background()
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("f.fifo")})
	if apiCode(err) != "InvalidAttributeValue" {
		t.Fatalf("a .fifo queue without FifoQueue: %v", err)
	}
	url := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("f.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}}))(t).QueueUrl)
	for i := range 3 {
		for _, g := range []string{"g1", "g2"} {
			must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageGroupId: aws.String(g), MessageBody: aws.String(fmt.Sprint(g, "-", i))}))(t)
		}
	}
	// A duplicate by content is stored once.
	d := must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageGroupId: aws.String("g1"), MessageBody: aws.String("g1-0")}))(t)
	if d.SequenceNumber == nil {
		t.Fatal("no SequenceNumber")
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	if apiCode(err) != "MissingParameter" {
		t.Fatalf("no group id: %v", err)
	}
	next := map[string]int{}
	for n, round := 0, 0; n < 6; round++ {
		if round == sqsRounds {
			t.Fatalf("after %d receives, %d of 6 messages (next per group: %v)", sqsRounds, n, next)
		}
		rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}}))(t)
		for _, m := range rm.Messages {
			g := m.Attributes["MessageGroupId"]
			if want := fmt.Sprint(g, "-", next[g]); aws.ToString(m.Body) != want {
				t.Fatalf("group %s: got %s, want %s", g, aws.ToString(m.Body), want)
			}
			next[g]++
			n++
			must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}))(t)
		}
	}
	rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t)
	if len(rm.Messages) != 0 {
		t.Fatalf("a duplicate was stored: %s", aws.ToString(rm.Messages[0].Body))
	}
}

// TestSQSCrossProtocol: a message sent over SQS pulled over LMQ HTTP with
// its attributes as headers, and the reverse.
func TestSQSCrossProtocol(t *testing.T) {
	t.Parallel()
	gw, c := startSQS(t)
	hc := gw.Client(t)
	ctx := context.Background()
	url := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("x")}))(t).QueueUrl)
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("from sqs"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Kind": {DataType: aws.String("String"), StringValue: aws.String("k1")}}}))(t)
	r := hc.MustPull("x", "5", "from sqs")
	if got := r.Header.Get("X-Sqs-Attr-Kind"); got != "Kind;String;k1" {
		t.Fatalf("attribute header %q (headers %v)", got, r.Header)
	}
	hc.Reply("x", r.ID(), "ack")
	hc.Push("x", []byte("from lmq"), "text/plain")
	rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5}))(t)
	if len(rm.Messages) != 1 || aws.ToString(rm.Messages[0].Body) != "from lmq" || aws.ToString(rm.Messages[0].MessageId) == "" {
		t.Fatalf("LMQ message over SQS: %+v", rm.Messages)
	}
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: rm.Messages[0].ReceiptHandle}))(t)

	// Bytes that are not text (pushed over LMQ) reach an SQS client as
	// text, with an MD5 of what it got (the SDK checks it).
	hc.Push("x", []byte{0xff, 'o', 'k', 0xfe}, "application/octet-stream")
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5}))(t)
	if len(rm.Messages) != 1 || aws.ToString(rm.Messages[0].Body) != "\uFFFDok\uFFFD" {
		t.Fatalf("binary LMQ message over SQS: %+v", rm.Messages)
	}
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: rm.Messages[0].ReceiptHandle}))(t)

	// SQS → RPC.
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("to rpc")}))(t)
	rpc := dialRPC(t, gw.RPCAddr)
	if m := rpc.MustPull("pull", "x", 5); fmt.Sprint(m.Content) != "to rpc" {
		t.Fatalf("SQS message over RPC: %#v", m.Content)
	}

	// SQS → a plain NATS program reading the queue's subject, attributes
	// among its headers; and a NATS program's publish → SQS.
	_, js := natsClient(t, gw)
	must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("to nats"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Kind": {DataType: aws.String("String"), StringValue: aws.String("k2")}}}))(t)
	st := must(js.Stream(ctx, mapping.StreamName("x")))(t)
	raw := must(st.GetLastMsgForSubject(ctx, mapping.QueueSubject("x")))(t)
	if string(raw.Data) != "to nats" || !strings.Contains(fmt.Sprint(raw.Header), "Kind;String;k2") {
		t.Fatalf("a NATS program sees %q with headers %v", raw.Data, raw.Header)
	}
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5}))(t)
	if len(rm.Messages) != 1 || aws.ToString(rm.Messages[0].Body) != "to nats" {
		t.Fatalf("after the NATS read: %+v", rm.Messages)
	}
	must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: rm.Messages[0].ReceiptHandle}))(t)
	must(js.Publish(ctx, mapping.QueueSubject("x"), []byte("from nats")))(t)
	rm = must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20}))(t)
	if len(rm.Messages) != 1 || aws.ToString(rm.Messages[0].Body) != "from nats" {
		t.Fatalf("a NATS program's message over SQS: %+v", rm.Messages)
	}
}

// TestSQSQueryProtocol speaks the query protocol by hand: form posts, XML
// answers and errors.
func TestSQSQueryProtocol(t *testing.T) {
	t.Parallel()
	gw, _ := startSQS(t)
	base := "http://" + gw.Bound.SQS + "/"
	post := func(v url.Values) (int, string) {
		t.Helper()
		v.Set("Version", "2012-11-05")
		resp, err := http.PostForm(base, v)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, body := post(url.Values{"Action": {"CreateQueue"}, "QueueName": {"q"}, "Attribute.1.Name": {"DelaySeconds"}, "Attribute.1.Value": {"0"}})
	if st != 200 || !strings.Contains(body, "<CreateQueueResult><QueueUrl>http://"+gw.Bound.SQS+"/000000000000/q</QueueUrl></CreateQueueResult>") {
		t.Fatalf("CreateQueue: %d %s", st, body)
	}
	qurl := "http://" + gw.Bound.SQS + "/000000000000/q"
	st, body = post(url.Values{"Action": {"SendMessage"}, "QueueUrl": {qurl}, "MessageBody": {"hello"},
		"MessageAttribute.1.Name": {"A"}, "MessageAttribute.1.Value.DataType": {"String"}, "MessageAttribute.1.Value.StringValue": {"v"}})
	if st != 200 || !strings.Contains(body, "<MD5OfMessageBody>5d41402abc4b2a76b9719d911017c592</MD5OfMessageBody>") {
		t.Fatalf("SendMessage: %d %s", st, body)
	}
	st, body = post(url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {qurl}, "WaitTimeSeconds": {"5"},
		"AttributeName.1": {"All"}, "MessageAttributeName.1": {"All"}})
	if st != 200 || !strings.Contains(body, "<Body>hello</Body>") ||
		!strings.Contains(body, "<MessageAttribute><Name>A</Name><Value><DataType>String</DataType><StringValue>v</StringValue></Value></MessageAttribute>") ||
		!strings.Contains(body, "<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>") {
		t.Fatalf("ReceiveMessage: %d %s", st, body)
	}
	st, body = post(url.Values{"Action": {"GetQueueUrl"}, "QueueName": {"missing"}})
	if st != 400 || !strings.Contains(body, "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>") || !strings.Contains(body, "<Type>Sender</Type>") {
		t.Fatalf("GetQueueUrl of a missing queue: %d %s", st, body)
	}
	st, body = post(url.Values{"Action": {"AddPermission"}, "QueueUrl": {qurl}})
	if st != 400 || !strings.Contains(body, "<Code>AWS.SimpleQueueService.UnsupportedOperation</Code>") {
		t.Fatalf("unsupported: %d %s", st, body)
	}
}

// TestSQSKill9: every message whose SendMessage was answered is received
// after a kill -9 under load.
func TestSQSKill9(t *testing.T) {
	heavy(t, "kills the gateway under SQS load")
	gw, c := startSQS(t)
	ctx := context.Background()
	url := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("k")}))(t).QueueUrl)
	const senders, perSender = 8, 10000
	acked := make(chan string, senders*perSender)
	// The kill comes (from the test's goroutine) once 200 messages per
	// sender were answered; every sender stops at its first error, and
	// after perSender messages at most.
	var sent atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			for n := range perSender {
				body := fmt.Sprint(i, "-", n)
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}); err != nil {
					return
				}
				acked <- body
				if sent.Add(1) == senders*200 {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-enough:
	case <-finished:
		t.Fatalf("the senders stopped after %d messages, before the kill", sent.Load())
	}
	gw.Kill()
	<-finished
	close(acked)
	want := map[string]bool{}
	for b := range acked {
		want[b] = true
	}
	gw.Restart()
	c = sqsClient(gw)
	url = "http://" + gw.Bound.SQS + "/000000000000/k"
	for len(want) > 0 {
		rm := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 20}))(t)
		if len(rm.Messages) == 0 {
			t.Fatalf("%d answered messages lost, e.g. %v", len(want), want)
		}
		for _, m := range rm.Messages {
			delete(want, aws.ToString(m.Body))
			must(c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}))(t)
		}
	}
}

// sqsClientAs is an SDK client of gw signing with the given credentials.
func sqsClientAs(gw *Gateway, id, secret string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "eu-west-3",
		BaseEndpoint: aws.String("http://" + gw.Bound.SQS),
		Credentials:  credentials.NewStaticCredentialsProvider(id, secret, ""),
	})
}

// With authentication on, every SQS request must carry a valid AWS
// signature: the operator's credential (access key "lmq", the --auth-token
// as secret) and a token's (POST /tokens gives both) are accepted, a wrong
// secret is SignatureDoesNotMatch, an unknown key InvalidClientTokenId, and
// a token's rights and prefix apply as over HTTP.
func TestSQSSigV4(t *testing.T) {
	t.Parallel()
	natsURL := StartNATS(t)
	g := newGateway(t)
	g.NATSURL = natsURL
	g.args = []string{"--rpc-listen", anyPort, "--nats-url", natsURL, "--sqs-listen", anyPort}
	g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"), "--tokens", "--auth-token", tokensOperator)
	c := g.Client(t)
	r := c.Expect(http.StatusCreated, http.MethodPost, "/tokens", []byte(`{"name":"sv","prefix":"sv-","rights":["push"]}`),
		append(bearer(tokensOperator), "Content-Type", "application/json")...)
	var tok struct {
		ID     string `json:"aws_access_key_id"`
		Secret string `json:"aws_secret_access_key"`
	}
	if err := json.Unmarshal(r.Body, &tok); err != nil || tok.ID == "" || tok.Secret == "" {
		t.Fatalf("POST /tokens: %v (%v)", r, err)
	}
	ctx := t.Context()
	op := sqsClientAs(g, "lmq", tokensOperator)
	url := *must(op.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sv-q")}))(t).QueueUrl
	_ = must(op.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("other")}))(t)
	if _, err := sqsClientAs(g, "lmq", "wrong").ListQueues(ctx, &sqs.ListQueuesInput{}); apiCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v (code %q)", err, apiCode(err))
	}
	if _, err := sqsClientAs(g, "AKIDUNKNOWN00000", "x").ListQueues(ctx, &sqs.ListQueuesInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Fatalf("unknown key: %v (code %q)", err, apiCode(err))
	}
	tc := sqsClientAs(g, tok.ID, tok.Secret)
	// The token lists only its queues, may send to them, and may neither
	// receive (no pull right) nor create queues (no admin right).
	lq := must(tc.ListQueues(ctx, &sqs.ListQueuesInput{}))(t)
	if len(lq.QueueUrls) != 1 || !strings.HasSuffix(lq.QueueUrls[0], "/sv-q") {
		t.Fatalf("the token lists %v; want sv-q only", lq.QueueUrls)
	}
	_ = must(tc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("from a token")}))(t)
	if _, err := tc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}); err == nil {
		t.Fatal("a push token received")
	}
	if got := must(op.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5}))(t); len(got.Messages) != 1 || *got.Messages[0].Body != "from a token" {
		t.Fatalf("the operator received %+v", got.Messages)
	}
	if _, err := tc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("made-by-token")}); err == nil {
		t.Fatal("a push token created a queue")
	}
	if _, err := tc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(strings.Replace(url, "sv-q", "other", 1))}); err == nil {
		t.Fatal("a token received from a queue outside its prefix")
	}
}

// RedrivePolicy: a message received maxReceiveCount times without being
// deleted moves to the dead-letter queue, where SQS clients receive it;
// ListDeadLetterSourceQueues names the source.
func TestSQSRedrive(t *testing.T) {
	t.Parallel()
	_, c := startSQS(t)
	ctx := t.Context()
	dlq := *must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("rd-dead")}))(t).QueueUrl
	arn := must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}}))(t).Attributes["QueueArn"]
	src := *must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("rd-src"), Attributes: map[string]string{
		"VisibilityTimeout": "1",
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"2"}`,
	}}))(t).QueueUrl
	_ = must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String("poison")}))(t)
	for i := 1; i <= 2; i++ {
		got := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &src, WaitTimeSeconds: 20,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}}))(t)
		if len(got.Messages) != 1 || got.Messages[0].Attributes["ApproximateReceiveCount"] != fmt.Sprint(i) {
			t.Fatalf("receive %d: %+v", i, got.Messages)
		}
		// Not deleted: it comes back after its visibility timeout.
	}
	got := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlq, WaitTimeSeconds: 20}))(t)
	if len(got.Messages) != 1 || *got.Messages[0].Body != "poison" {
		t.Fatalf("dead-letter queue: %+v", got.Messages)
	}
	srcs := must(c.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq}))(t)
	if len(srcs.QueueUrls) != 1 || !strings.HasSuffix(srcs.QueueUrls[0], "/rd-src") {
		t.Fatalf("dead-letter sources %v", srcs.QueueUrls)
	}
	if left := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &src}))(t); len(left.Messages) != 0 {
		t.Fatalf("the source still hands out %+v", left.Messages)
	}
}

// SetQueueAttributes and LMQ's properties are one setting seen from two
// sides: a change on either shows on the other; DelaySeconds delays the
// queue's SQS sends.
func TestSQSAttributesAndProperties(t *testing.T) {
	t.Parallel()
	gw, c := startSQS(t)
	hc := gw.Client(t)
	ctx := t.Context()
	url := *must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("attrs")}))(t).QueueUrl
	get := func() map[string]string {
		return must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}}))(t).Attributes
	}
	created := get()["CreatedTimestamp"]
	_ = must(c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{
		"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600", "DelaySeconds": "1",
	}}))(t)
	if p := hc.Props("attrs"); !strings.Contains(p, `"timeout":45`) || !strings.Contains(p, `"ttl":3600`) {
		t.Fatalf("LMQ properties after SetQueueAttributes: %s", p)
	}
	hc.PatchProps("attrs", `{"timeout":12}`)
	a := get()
	if a["VisibilityTimeout"] != "12" || a["MessageRetentionPeriod"] != "3600" || a["DelaySeconds"] != "1" || a["CreatedTimestamp"] != created {
		t.Fatalf("attributes after PATCH /properties: %v", a)
	}
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "-1"}}); err == nil {
		t.Fatal("a negative VisibilityTimeout was accepted")
	}
	// DelaySeconds 1: a send is not receivable at once, and is a second later.
	_ = must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("later")}))(t)
	if got := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))(t); len(got.Messages) != 0 {
		t.Fatalf("a delayed message was received at once: %+v", got.Messages)
	}
	if got := must(c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20}))(t); len(got.Messages) != 1 {
		t.Fatalf("the delayed message did not come: %+v", got.Messages)
	}
}
