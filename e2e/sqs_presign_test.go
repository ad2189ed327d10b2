package e2e

// Presigned URLs and unsigned bodies on the SQS port with authentication
// on (issue 40, items 2 and 3).

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// presignToken is the --auth-token of the presigning tests: access key id
// "lmq", this secret.
const presignToken = "presign-operator-secret"

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// presignSDK presigns method on rawURL with the Go SDK's signer over
// payloadHash, valid for 5 minutes.
func presignSDK(t *testing.T, method, rawURL, payloadHash string) string {
	t.Helper()
	u := rawURL + "&X-Amz-Expires=300"
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: "lmq", SecretAccessKey: presignToken},
		req, payloadHash, "sqs", "us-east-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// presignBotocore builds a presigned URL as botocore's SigV4QueryAuth does
// for a query-protocol service: the operation's parameters, then
// X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires and
// X-Amz-SignedHeaders=host (no X-Amz-Content-Sha256, neither as a parameter
// nor as a header to send), then X-Amz-Signature appended; signed here by
// hand, by the published algorithm, over payload, at a time, valid for
// expires seconds.
func presignBotocore(method, host string, params [][2]string, payload string, at time.Time, expires int) string {
	enc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	stamp := at.UTC().Format("20060102T150405Z")
	scope := stamp[:8] + "/us-east-1/sqs/aws4_request"
	all := append(slices.Clone(params),
		[2]string{"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
		[2]string{"X-Amz-Credential", "lmq/" + scope},
		[2]string{"X-Amz-Date", stamp},
		[2]string{"X-Amz-Expires", strconv.Itoa(expires)},
		[2]string{"X-Amz-SignedHeaders", "host"})
	var q []string
	enced := make([][2]string, len(all))
	for i, p := range all {
		q = append(q, enc(p[0])+"="+enc(p[1]))
		enced[i] = [2]string{enc(p[0]), enc(p[1])}
	}
	// The canonical query: sorted by encoded name, then value.
	slices.SortFunc(enced, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	canon := make([]string, len(enced))
	for i, p := range enced {
		canon[i] = p[0] + "=" + p[1]
	}
	cr := method + "\n/\n" + strings.Join(canon, "&") + "\nhost:" + host + "\n\nhost\n" + payload
	h := sha256.Sum256([]byte(cr))
	sts := "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(h[:])
	key := []byte("AWS4" + presignToken)
	for _, part := range []string{stamp[:8], "us-east-1", "sqs", "aws4_request", sts} {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(part))
		key = m.Sum(nil)
	}
	return "http://" + host + "/?" + strings.Join(q, "&") + "&X-Amz-Signature=" + hex.EncodeToString(key)
}

// sqsSend sends a request to the SQS port and returns its status and body.
func sqsSend(t *testing.T, hc *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func newRequest(t *testing.T, method, u, body string, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// presignGateway starts a gateway whose SQS port requires signatures by
// the operator's key ("lmq", presignToken), and returns its SQS address and
// an SDK client signing with that key.
func presignGateway(t *testing.T) (string, *sqs.Client) {
	t.Helper()
	gw := Start(t, "--sqs-listen", anyPort, "--auth-token", presignToken)
	return gw.Bound.SQS, sqsClientAs(gw, "lmq", presignToken)
}

// presignQueue creates queue name holding n messages and returns its URL and
// a function that reads how many wait in it.
func presignQueue(t *testing.T, c *sqs.Client, name string, n int) (string, func() string) {
	t.Helper()
	ctx := t.Context()
	q := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}))(t).QueueUrl)
	for range n {
		_ = must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("held")}))(t)
	}
	return q, func() string {
		a := must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}}))(t)
		return a.Attributes["ApproximateNumberOfMessages"]
	}
}

// presignRead is the query-protocol URL of a GetQueueAttributes of queue
// URL q, and the answer's part that shows two messages waiting.
func presignRead(host, q string) (string, string) {
	return "http://" + host + "/?Action=GetQueueAttributes&QueueUrl=" + url.QueryEscape(q) + "&AttributeName.1=ApproximateNumberOfMessages",
		"<Attribute><Name>ApproximateNumberOfMessages</Name><Value>2</Value></Attribute>"
}

// TestSQSPresignedURLs: a presigned URL as botocore and the Go SDK make it,
// signed over the empty body's hash or over UNSIGNED-PAYLOAD, without
// X-Amz-Content-Sha256, is served when fetched plainly with the method it
// was signed for; one signed for POST and fetched with GET is refused (the
// method is signed; AWS refuses it too).
func TestSQSPresignedURLs(t *testing.T) {
	t.Parallel()
	host, op := presignGateway(t)
	q, _ := presignQueue(t, op, "a-ps", 2)
	read, answered := presignRead(host, q)
	readParams := [][2]string{{"Action", "GetQueueAttributes"}, {"Version", "2012-11-05"}, {"QueueUrl", q}, {"AttributeName.1", "ApproximateNumberOfMessages"}}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	for _, c := range []struct {
		name, method, url string
	}{
		{"Go SDK, UNSIGNED-PAYLOAD", http.MethodGet, presignSDK(t, http.MethodGet, read, "UNSIGNED-PAYLOAD")},
		{"Go SDK, empty body's hash", http.MethodGet, presignSDK(t, http.MethodGet, read, emptySHA256)},
		{"botocore's form, UNSIGNED-PAYLOAD", http.MethodGet, presignBotocore(http.MethodGet, host, readParams, "UNSIGNED-PAYLOAD", time.Now(), 300)},
		// What botocore 1.43 signs (generate_presigned_url(...,
		// HttpMethod='GET')): the empty body's hash.
		{"botocore's form, empty body's hash", http.MethodGet, presignBotocore(http.MethodGet, host, readParams, emptySHA256, time.Now(), 300)},
		// botocore's default method for a query-protocol action is POST.
		{"botocore's form, POST", http.MethodPost, presignBotocore(http.MethodPost, host, readParams, emptySHA256, time.Now(), 300)},
		{"botocore's form, POST, UNSIGNED-PAYLOAD", http.MethodPost, presignBotocore(http.MethodPost, host, readParams, "UNSIGNED-PAYLOAD", time.Now(), 300)},
		// botocore's default lifetime is an hour: used 20 minutes after
		// signing, beyond the 15 minutes a header signature has.
		{"signed 20 minutes ago, valid for an hour", http.MethodGet, presignBotocore(http.MethodGet, host, readParams, emptySHA256, time.Now().Add(-20*time.Minute), 3600)},
	} {
		if st, body := sqsSend(t, hc, newRequest(t, c.method, c.url, "")); st != http.StatusOK || !strings.Contains(body, answered) {
			t.Errorf("%s: %d %s", c.name, st, body)
		}
	}
	st, body := sqsSend(t, hc, newRequest(t, http.MethodGet, presignBotocore(http.MethodPost, host, readParams, emptySHA256, time.Now(), 300), ""))
	if st != http.StatusForbidden || !strings.Contains(body, "<Code>SignatureDoesNotMatch</Code>") {
		t.Errorf("a POST URL fetched with GET: %d %s", st, body)
	}
	// Past its X-Amz-Expires (300 s), signed 10 minutes ago.
	st, body = sqsSend(t, hc, newRequest(t, http.MethodGet, presignBotocore(http.MethodGet, host, readParams, "UNSIGNED-PAYLOAD", time.Now().Add(-10*time.Minute), 300), ""))
	if st != http.StatusForbidden || !strings.Contains(body, "Signature expired") {
		t.Errorf("an expired URL: %d %s", st, body)
	}
}

// TestSQSPresignedUnsignedBody: a body the signature does not cover (a
// presigned URL, with or without X-Amz-Content-Sha256: UNSIGNED-PAYLOAD)
// may not add to or override what was signed: a read-only link must not
// purge its queue or send to another. Refused 403 AccessDenied, nothing
// done; the link itself still serves its read.
func TestSQSPresignedUnsignedBody(t *testing.T) {
	t.Parallel()
	host, op := presignGateway(t)
	q, waiting := presignQueue(t, op, "a-ps", 2)
	q2, waiting2 := presignQueue(t, op, "a-ps2", 0)
	read, answered := presignRead(host, q)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	link := presignSDK(t, http.MethodPost, read, "UNSIGNED-PAYLOAD")
	for _, c := range []string{
		"Action=PurgeQueue",
		"Action=SendMessage&QueueUrl=" + url.QueryEscape(q2) + "&MessageBody=x",
		"MaxNumberOfMessages=10",
	} {
		for _, hdr := range [][]string{nil, {"X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"}} {
			st, body := sqsSend(t, hc, newRequest(t, http.MethodPost, link, c, hdr...))
			if st != http.StatusForbidden || !strings.Contains(body, "<Code>AccessDenied</Code>") || !strings.Contains(body, "signature does not cover") {
				t.Errorf("presigned link with the body %q (%v): %d %s, want 403 AccessDenied", c, hdr, st, body)
			}
		}
	}
	if w, w2 := waiting(), waiting2(); w != "2" || w2 != "0" {
		t.Errorf("after the refused bodies: a-ps holds %s (want 2), a-ps2 %s (want 0)", w, w2)
	}
	if st, body := sqsSend(t, hc, newRequest(t, http.MethodPost, link, "")); st != http.StatusOK || !strings.Contains(body, answered) {
		t.Errorf("the presigned POST link: %d %s", st, body)
	}
}

// TestSQSUnsignedBodyAndConflicts: a header signature with
// X-Amz-Content-Sha256: UNSIGNED-PAYLOAD covers no body either, in either
// protocol; a parameter in both the URL and a signed body with different
// values is refused 400 rather than one of them chosen. Nothing is done on
// a refusal; a signed body acts as it always did.
func TestSQSUnsignedBodyAndConflicts(t *testing.T) {
	t.Parallel()
	host, op := presignGateway(t)
	q, waiting := presignQueue(t, op, "b-ps", 2)
	read, answered := presignRead(host, q)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: "lmq", SecretAccessKey: presignToken}
	sign := func(req *http.Request, payload string) *http.Request {
		t.Helper()
		if err := signer.SignHTTP(t.Context(), creds, req, payload, "sqs", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		return req
	}
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	const unsigned = "UNSIGNED-PAYLOAD"

	purge := "Action=PurgeQueue&QueueUrl=" + url.QueryEscape(q)
	st, body := sqsSend(t, hc, sign(newRequest(t, http.MethodPost, "http://"+host+"/", purge, "X-Amz-Content-Sha256", unsigned), unsigned))
	if st != http.StatusForbidden || !strings.Contains(body, "<Code>AccessDenied</Code>") {
		t.Errorf("UNSIGNED-PAYLOAD form post: %d %s", st, body)
	}
	jreq := newRequest(t, http.MethodPost, "http://"+host+"/", `{"QueueUrl":"`+q+`"}`,
		"X-Amz-Content-Sha256", unsigned, "X-Amz-Target", "AmazonSQS.PurgeQueue", "Content-Type", "application/x-amz-json-1.0")
	st, body = sqsSend(t, hc, sign(jreq, unsigned))
	if st != http.StatusForbidden || !strings.Contains(body, `"__type":"com.amazonaws.sqs#AccessDenied"`) {
		t.Errorf("UNSIGNED-PAYLOAD JSON: %d %s", st, body)
	}
	// Without parameters in its unsigned body, a JSON request is served.
	jreq = newRequest(t, http.MethodPost, "http://"+host+"/", `{}`,
		"X-Amz-Content-Sha256", unsigned, "X-Amz-Target", "AmazonSQS.ListQueues", "Content-Type", "application/x-amz-json-1.0")
	if st, body := sqsSend(t, hc, sign(jreq, unsigned)); st != http.StatusOK || !strings.Contains(body, "b-ps") {
		t.Errorf("UNSIGNED-PAYLOAD JSON without parameters: %d %s", st, body)
	}
	// Both signed, URL and body disagreeing: refused, not one picked.
	st, body = sqsSend(t, hc, sign(newRequest(t, http.MethodPost, read, purge), hash(purge)))
	if st != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidParameterCombination</Code>") || !strings.Contains(body, "Action") {
		t.Errorf("Action in the URL and another in the body: %d %s", st, body)
	}
	if w := waiting(); w != "2" {
		t.Fatalf("b-ps holds %s after the refusals, want 2", w)
	}
	// Agreeing: served.
	same := "Action=GetQueueAttributes&QueueUrl=" + url.QueryEscape(q)
	if st, body := sqsSend(t, hc, sign(newRequest(t, http.MethodPost, read, same), hash(same))); st != http.StatusOK || !strings.Contains(body, answered) {
		t.Errorf("the same parameters in the URL and the body: %d %s", st, body)
	}
	// A signed body acts as it always did.
	if st, body := sqsSend(t, hc, sign(newRequest(t, http.MethodPost, "http://"+host+"/", purge), hash(purge))); st != http.StatusOK {
		t.Fatalf("signed PurgeQueue: %d %s", st, body)
	}
	if w := waiting(); w != "0" {
		t.Fatalf("b-ps holds %s after a signed purge, want 0", w)
	}
}
