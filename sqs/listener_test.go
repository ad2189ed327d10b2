package sqs_test

// The SQS front end over a real listener (loopback TCP, net/http) on a real
// core (embedded nats-server): what a token may learn of other namespaces,
// and what a send must refuse before storing anything.

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/sqs"
)

// operatorSecret is the operator's bearer token: with access key "lmq",
// its SigV4 credential.
const operatorSecret = "operator-secret"

// listener is an SQS front end on a real core, served on loopback.
type listener struct {
	core   *gateway.Gateway
	tokens *auth.Store // nil without authentication
	url    string      // http://127.0.0.1:port
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startListener starts a core on an embedded nats-server and the SQS front
// end on a loopback listener; with withAuth, requests must be signed by the
// operator (access key "lmq", secret operatorSecret) or a token.
func startListener(t *testing.T, withAuth bool) *listener {
	t.Helper()
	ns := testnats.Start(t)
	core := testcore.New(t, testnats.Connect(t, ns, "sqs"), gateway.Config{Logger: quiet()})
	l := &listener{core: core}
	opts := sqs.Options{Logger: quiet()}
	if withAuth {
		ts, err := auth.Open(t.Context(), core, quiet())
		if err != nil {
			t.Fatal(err)
		}
		l.tokens = ts
		guard := auth.NewGuard(auth.Credential{BearerToken: operatorSecret}, ts)
		// As the server wires it (server/sqs.go): refusals in SQS's terms.
		opts.Authenticate = func(r *http.Request, body []byte) (*auth.SigV4Result, error) {
			p, err := guard.AuthenticateSigV4(r, body, time.Now())
			var se *auth.SigV4Error
			if errors.As(err, &se) {
				return nil, &sqs.AuthError{Code: se.Code, Message: se.Message, Status: se.Status()}
			}
			return p, err
		}
	}
	srv := httptest.NewServer(sqs.New(sqs.CoreOf(core), opts))
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// client is an SDK client of l signing with the given credentials.
func (l *listener) client(id, secret string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(l.url),
		Credentials:  credentials.NewStaticCredentialsProvider(id, secret, ""),
		// One try: a refusal is what the test looks at.
		RetryMaxAttempts: 1,
	})
}

// operator is an SDK client signing as the operator.
func (l *listener) operator() *awssqs.Client { return l.client("lmq", operatorSecret) }

// token creates a token of the given prefix and rights and returns an SDK
// client signing as it.
func (l *listener) token(t *testing.T, prefix string, rights ...string) *awssqs.Client {
	t.Helper()
	tok, _, err := l.tokens.CreateToken(t.Context(), auth.TokenSpec{Name: "t" + strings.TrimSuffix(prefix, "-"), Prefix: prefix, Rights: rights})
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := auth.SigV4Credentials(tok)
	if !ok {
		t.Fatalf("token %q has no SigV4 credentials", tok)
	}
	return l.client(id, secret)
}

// refusal is an SDK error's HTTP status, code and message.
type refusal struct {
	status        int
	code, message string
}

func refusalOf(t *testing.T, err error) refusal {
	t.Helper()
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || !errors.As(err, &re) {
		t.Fatalf("want an SQS error answer, got %v", err)
	}
	return refusal{re.HTTPStatusCode(), ae.ErrorCode(), ae.ErrorMessage()}
}

// must is v, or a panic (failing the test with its stack) on err: the
// SDK's calls return two values, which a t.Fatal helper cannot take inline.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A token scoped to "a-" names a "b-" queue as its own queue's dead-letter
// target: the answer is the same 403 whether that queue exists or not, for
// SetQueueAttributes and CreateQueue alike, and nothing changes. (It was 400
// InvalidAttributeValue "Dead-letter target does not exist" for a missing
// one and 403 for an existing one: an oracle of other namespaces' queues.)
func TestRedriveTargetOutsideScopeTellsNothing(t *testing.T) {
	t.Parallel()
	l := startListener(t, true)
	ctx := t.Context()
	op := l.operator()
	src := *must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("a-src")})).QueueUrl
	_ = must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("a-dlq")}))
	_ = must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("b-exists")}))
	tc := l.token(t, "a-", "admin")

	policy := func(target string) map[string]string {
		return map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + target + `","maxReceiveCount":3}`}
	}
	// The queue's name is in the message; the rest must not differ.
	same := func(what string, exists, missing refusal) {
		t.Helper()
		missing.message = strings.ReplaceAll(missing.message, "b-missing", "b-exists")
		if exists != missing {
			t.Errorf("%s: an existing target answers %+v, a missing one %+v", what, exists, missing)
		}
		if exists.status != http.StatusForbidden || exists.code != "AccessDenied" {
			t.Errorf("%s: %+v, want 403 AccessDenied", what, exists)
		}
	}

	set := func(target string) refusal {
		_, err := tc.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &src, Attributes: policy(target)})
		return refusalOf(t, err)
	}
	same("SetQueueAttributes", set("b-exists"), set("b-missing"))

	create := func(target string) refusal {
		_, err := tc.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("a-new"), Attributes: policy(target)})
		return refusalOf(t, err)
	}
	same("CreateQueue", create("b-exists"), create("b-missing"))

	if ok, err := l.core.Queues().QueueExists(ctx, "a-new"); err != nil || ok {
		t.Fatalf("a refused CreateQueue made its queue (%v, %v)", ok, err)
	}
	attrs := must(op.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &src, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})).Attributes
	if attrs["RedrivePolicy"] != "" {
		t.Fatalf("a refused SetQueueAttributes set %s", attrs["RedrivePolicy"])
	}

	// Within the token's queues, existence is told as SQS tells it.
	if r := set("a-missing"); r.status != http.StatusBadRequest || r.code != "InvalidAttributeValue" {
		t.Errorf("a missing target of the token's own: %+v, want 400 InvalidAttributeValue", r)
	}
	_ = must(tc.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &src, Attributes: policy("a-dlq")}))
}

// ListDeadLetterSourceQueues names only the token's queues: a queue of
// another namespace whose RedrivePolicy points into the token's queue is
// left out (it was named); the operator sees it.
func TestListDeadLetterSourcesInScope(t *testing.T) {
	t.Parallel()
	l := startListener(t, true)
	ctx := t.Context()
	op := l.operator()
	dlq := *must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("a-dlq")})).QueueUrl
	redrive := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:a-dlq","maxReceiveCount":2}`}
	for _, q := range []string{"a-src", "b-src"} {
		_ = must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(q), Attributes: redrive}))
	}
	names := func(c *awssqs.Client) string {
		out := must(c.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq}))
		var n []string
		for _, u := range out.QueueUrls {
			n = append(n, u[strings.LastIndexByte(u, '/')+1:])
		}
		return strings.Join(n, ",")
	}
	if got := names(l.token(t, "a-", "pull")); got != "a-src" {
		t.Errorf("a token of a- lists the sources %q, want a-src only", got)
	}
	if got := names(op); got != "a-src,b-src" {
		t.Errorf("the operator lists the sources %q, want a-src,b-src", got)
	}
}

// rawSend posts one SendMessage or SendMessageBatch request, unsigned (no
// authentication), in the JSON protocol (body: a JSON object) or the query
// protocol (body: form parameters), and returns the status and answer.
func (l *listener) raw(t *testing.T, jsonProto bool, action, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, l.url+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if jsonProto {
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// size is the number of messages queue holds.
func (l *listener) size(t *testing.T, queue string) uint64 {
	t.Helper()
	d, err := l.core.Inspect().QueueDetail(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return d.Size
}

// sendParams are a SendMessage's parameters beyond QueueUrl and
// MessageBody: name, then value (raw bytes, any of them).
type sendParams []string

// jsonBody is the JSON protocol's SendMessage body. Values are written as
// they are between quotes when they need no escape, so that a byte such as
// 0xFF reaches the server as a client could send it.
func (p sendParams) jsonBody(queue string) string {
	var b strings.Builder
	b.WriteString(`{"QueueUrl":"` + queue + `","MessageBody":"x"`)
	var attrs []string
	for i := 0; i+1 < len(p); i += 2 {
		name, v := p[i], p[i+1]
		if typ, ok := strings.CutPrefix(name, "attr:"); ok {
			attrs = append(attrs, `"n`+typ+`":{"DataType":"`+typ+`","StringValue":"`+v+`"}`)
			continue
		}
		b.WriteString(`,"` + name + `":"` + v + `"`)
	}
	if len(attrs) > 0 {
		b.WriteString(`,"MessageAttributes":{` + strings.Join(attrs, ",") + `}`)
	}
	b.WriteString("}")
	return b.String()
}

// form is the query protocol's SendMessage parameters (prefix "" for a
// request's, "SendMessageBatchRequestEntry.N." for a batch entry's).
func (p sendParams) form(v url.Values, prefix string) {
	v.Set(prefix+"MessageBody", "x")
	n := 0
	for i := 0; i+1 < len(p); i += 2 {
		name, val := p[i], p[i+1]
		if typ, ok := strings.CutPrefix(name, "attr:"); ok {
			n++
			a := prefix + "MessageAttribute." + string(rune('0'+n)) + "."
			v.Set(a+"Name", "n"+typ)
			v.Set(a+"Value.DataType", typ)
			v.Set(a+"Value.StringValue", val)
			continue
		}
		v.Set(prefix+name, val)
	}
}

// A MessageDeduplicationId or MessageGroupId outside SQS's characters
// (printable ASCII without the space, 1 to 128) and a Number attribute that
// is not a decimal number in SQS's range are refused with
// InvalidParameterValue over both protocols, and nothing is stored; in a
// batch the entry fails on its own (SQS's per-entry shape) and its
// neighbour is stored. They were stored (NaN, Inf, 0x1p-2 parsed as Go
// floats; any bytes as ids).
func TestSendRefusesWhatSQSRefuses(t *testing.T) {
	t.Parallel()
	l := startListener(t, false)
	ctx := t.Context()
	op := l.client("AKID", "any")
	_ = must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("v.fifo"), Attributes: map[string]string{"FifoQueue": "true"}}))
	_ = must(op.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("v-std")}))

	long := strings.Repeat("g", 129)
	refused := []struct {
		queue  string
		params sendParams
	}{
		{"v.fifo", sendParams{"MessageGroupId", "g", "MessageDeduplicationId", "\xff"}},
		{"v.fifo", sendParams{"MessageGroupId", "g", "MessageDeduplicationId", "has space"}},
		{"v.fifo", sendParams{"MessageGroupId", "g", "MessageDeduplicationId", "caf\u00e9"}},
		{"v.fifo", sendParams{"MessageGroupId", "g", "MessageDeduplicationId", long}},
		{"v.fifo", sendParams{"MessageGroupId", "\xff", "MessageDeduplicationId", "d"}},
		{"v.fifo", sendParams{"MessageGroupId", "tab\there", "MessageDeduplicationId", "d"}},
		{"v.fifo", sendParams{"MessageGroupId", long, "MessageDeduplicationId", "d"}},
		{"v-std", sendParams{"MessageGroupId", "\xff"}},
		{"v-std", sendParams{"attr:Number", "NaN"}},
		{"v-std", sendParams{"attr:Number", "Inf"}},
		{"v-std", sendParams{"attr:Number", "-Infinity"}},
		{"v-std", sendParams{"attr:Number", "0x1p-2"}},
		{"v-std", sendParams{"attr:Number", "1_000"}},
		{"v-std", sendParams{"attr:Number", "1e127"}},
		{"v-std", sendParams{"attr:Number", "1e-129"}},
		{"v-std", sendParams{"attr:Number", "1234567890123456789012345678901234567890"}},
		{"v-std", sendParams{"attr:Number.custom", " 1"}},
	}
	for _, jsonProto := range []bool{true, false} {
		for _, c := range refused {
			if jsonProto && strings.Contains(strings.Join(c.params, ""), "\t") {
				continue // a raw tab is not valid JSON: the decoder refuses it first
			}
			var st int
			var body string
			if jsonProto {
				st, body = l.raw(t, true, "SendMessage", c.params.jsonBody(c.queue))
			} else {
				v := url.Values{"Action": {"SendMessage"}, "QueueUrl": {c.queue}}
				c.params.form(v, "")
				st, body = l.raw(t, false, "SendMessage", v.Encode())
			}
			if st != http.StatusBadRequest || !strings.Contains(body, "InvalidParameterValue") {
				t.Errorf("json %v, %s %q: %d %s; want 400 InvalidParameterValue", jsonProto, c.queue, c.params, st, body)
			}
			if n := l.size(t, c.queue); n != 0 {
				t.Errorf("json %v, %s %q: the queue holds %d messages, want none", jsonProto, c.queue, c.params, n)
				if err := l.core.Queues().Purge(ctx, c.queue); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// A batch: the bad entry fails on its own, its neighbour is stored.
	v := url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {"v-std"}}
	v.Set("SendMessageBatchRequestEntry.1.Id", "good")
	sendParams{"attr:Number", "-1.5e3"}.form(v, "SendMessageBatchRequestEntry.1.")
	v.Set("SendMessageBatchRequestEntry.2.Id", "bad")
	sendParams{"attr:Number", "NaN"}.form(v, "SendMessageBatchRequestEntry.2.")
	st, body := l.raw(t, false, "SendMessageBatch", v.Encode())
	if st != http.StatusOK || !strings.Contains(body, "<SendMessageBatchResultEntry><Id>good</Id>") ||
		!strings.Contains(body, "<BatchResultErrorEntry><Id>bad</Id><SenderFault>true</SenderFault><Code>InvalidParameterValue</Code>") {
		t.Errorf("query batch: %d %s", st, body)
	}
	st, body = l.raw(t, true, "SendMessageBatch", `{"QueueUrl":"v.fifo","Entries":[`+
		`{"Id":"good","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"!\"#$%&'()*+,-./:;<=>?@[\\]^_`+"`"+`{|}~"},`+
		`{"Id":"bad","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"`+"\xff"+`"}]}`)
	if st != http.StatusOK || !strings.Contains(body, `"Successful":[{"Id":"good"`) ||
		!strings.Contains(body, `"Failed":[{"Id":"bad","SenderFault":true,"Code":"InvalidParameterValue"`) {
		t.Errorf("JSON batch: %d %s", st, body)
	}
	if a, b := l.size(t, "v-std"), l.size(t, "v.fifo"); a != 1 || b != 1 {
		t.Fatalf("after the batches: %d and %d messages, want 1 and 1 (the good entries)", a, b)
	}

	// What SQS accepts still goes through.
	for _, p := range []sendParams{
		{"attr:Number", "0"}, {"attr:Number", "-0.0e-999"}, {"attr:Number", "+.5"}, {"attr:Number", "5."},
		{"attr:Number", "1E126"}, {"attr:Number", "9.9e125"}, {"attr:Number", "-1e-128"},
		{"attr:Number", "12345678901234567890123456789012345678"}, {"attr:Number", "1000000000000000000000000000000000000000000"},
		{"MessageGroupId", strings.Repeat("g", 128)},
	} {
		v := url.Values{"Action": {"SendMessage"}, "QueueUrl": {"v-std"}}
		p.form(v, "")
		if st, body := l.raw(t, false, "SendMessage", v.Encode()); st != http.StatusOK {
			t.Errorf("%q: %d %s", p, st, body)
		}
	}
}
