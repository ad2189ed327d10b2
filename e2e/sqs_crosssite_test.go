package e2e

// Requests a browser makes to the SQS port (issue 40, item 1): a page of
// another site, or the browser on its own (an image, a link), may not
// change anything; SDKs, the CLI and curl, which send none of the browser's
// headers, are untouched.

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// sqsBrowserRequest is one request to the SQS port with a browser's headers.
type sqsBrowserRequest struct {
	name   string
	method string // GET: the parameters in the URL; POST: a form body
	params url.Values
	json   string // the JSON protocol's action (X-Amz-Target) and body
	hdr    map[string]string
}

// sqsBrowserSend sends req to the SQS port at addr and returns its status
// and body.
func sqsBrowserSend(t *testing.T, hc *http.Client, addr string, req sqsBrowserRequest) (int, string) {
	t.Helper()
	var r *http.Request
	var err error
	switch {
	case req.json != "":
		r, err = http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/", strings.NewReader(req.params.Get("body")))
		if err == nil {
			r.Header.Set("X-Amz-Target", "AmazonSQS."+req.json)
			r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		}
	case req.method == http.MethodGet:
		r, err = http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/?"+req.params.Encode(), nil)
	default:
		r, err = http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/", strings.NewReader(req.params.Encode()))
		if err == nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.hdr {
		r.Header.Set(k, v)
	}
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatalf("%s: %v", req.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSQSCrossSiteRequests: without authentication (the SQS port's
// default), state-changing actions that a page of another origin made a
// browser send, or that the browser sent on its own (an <img>, a link), are
// refused 403 AccessDenied in SQS's error shape, whatever the method, and
// change nothing; reads, SDK requests, requests with none of the browser's
// headers (curl), scripts of the gateway's own origin and of an
// --allowed-origins origin are served.
func TestSQSCrossSiteRequests(t *testing.T) {
	t.Parallel()
	gw, c := startSQS(t, "--allowed-origins", "HTTPS://Console.Example:443/")
	ctx := t.Context()
	addr := gw.Bound.SQS
	qurl := aws.ToString(must(c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")}))(t).QueueUrl)
	const held = 3
	for i := range held {
		_ = must(c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &qurl, MessageBody: aws.String("m" + strconv.Itoa(i))}))(t)
	}
	// counts is what the queue holds: waiting and in flight.
	counts := func() (waiting, inFlight string) {
		t.Helper()
		a := must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &qurl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}}))(t)
		return a.Attributes["ApproximateNumberOfMessages"], a.Attributes["ApproximateNumberOfMessagesNotVisible"]
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)

	self := "http://" + addr
	action := func(a string, extra ...string) url.Values {
		v := url.Values{"Action": {a}, "QueueUrl": {qurl}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	img := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
	refused := []sqsBrowserRequest{
		// The two curl commands: an <img> and a bare cross-site GET.
		{name: "cross-site <img> PurgeQueue", method: http.MethodGet, params: action("PurgeQueue"), hdr: img},
		{name: "cross-site GET DeleteQueue", method: http.MethodGet, params: action("DeleteQueue"), hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{name: "cross-site form SendMessage", method: http.MethodPost, params: action("SendMessage", "MessageBody", "x"),
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Origin": "http://evil.example"}},
		// Another port of the same host (the console, any local app).
		{name: "same-site fetch ReceiveMessage", method: http.MethodPost, params: action("ReceiveMessage"),
			hdr: map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "http://127.0.0.1:1"}},
		// Browsers without Sec-Fetch-*: Origin, or with neither a Referer.
		{name: "foreign Origin DeleteMessage", method: http.MethodPost, params: action("DeleteMessage", "ReceiptHandle", "x"), hdr: map[string]string{"Origin": "http://evil.example"}},
		{name: "Origin null SetQueueAttributes", method: http.MethodPost, params: action("SetQueueAttributes", "Attribute.1.Name", "DelaySeconds", "Attribute.1.Value", "5"), hdr: map[string]string{"Origin": "null"}},
		{name: "foreign Referer ReceiveMessage", method: http.MethodGet, params: action("ReceiveMessage"), hdr: map[string]string{"Referer": "http://evil.example/page.html"}},
		// The browser on its own, whatever the site: a link opened from a
		// mail program, a same-origin image.
		{name: "navigation from outside PurgeQueue", method: http.MethodGet, params: action("PurgeQueue"),
			hdr: map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-User": "?1"}},
		{name: "same-origin <img> DeleteQueue", method: http.MethodGet, params: action("DeleteQueue"),
			hdr: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}},
		// A trusted origin's page may call the API from a script, not with an image.
		{name: "trusted origin's <img> PurgeQueue", method: http.MethodGet, params: action("PurgeQueue"),
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image", "Origin": "https://console.example"}},
		// The JSON protocol: refused in its shape.
		{name: "cross-site JSON PurgeQueue", json: "PurgeQueue", params: url.Values{"body": {`{"QueueUrl":"` + qurl + `"}`}},
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "http://evil.example"}},
		{name: "cross-site JSON CreateQueue", json: "CreateQueue", params: url.Values{"body": {`{"QueueName":"planted"}`}},
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for _, req := range refused {
		st, body := sqsBrowserSend(t, hc, addr, req)
		switch {
		case st != http.StatusForbidden:
			t.Errorf("%s: %d %s, want 403", req.name, st, body)
		case req.json != "" && !strings.Contains(body, `"__type":"com.amazonaws.sqs#AccessDenied"`):
			t.Errorf("%s: %s, want SQS's JSON error AccessDenied", req.name, body)
		case req.json == "" && (!strings.Contains(body, "<Code>AccessDenied</Code>") || !strings.Contains(body, "<ErrorResponse>")):
			t.Errorf("%s: %s, want SQS's XML error AccessDenied", req.name, body)
		}
		if w, f := counts(); w != strconv.Itoa(held) || f != "0" {
			t.Fatalf("after %s: %s waiting, %s in flight; want %d and 0", req.name, w, f, held)
		}
	}
	if _, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("planted")}); apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("a refused cross-site CreateQueue made the queue: %v", err)
	}
	if a := must(c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &qurl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameDelaySeconds}}))(t); a.Attributes["DelaySeconds"] != "0" {
		t.Errorf("a refused SetQueueAttributes changed DelaySeconds to %s", a.Attributes["DelaySeconds"])
	}

	served := []sqsBrowserRequest{
		// Reads, from anywhere.
		{name: "cross-site <img> GetQueueAttributes", method: http.MethodGet, params: action("GetQueueAttributes", "AttributeName.1", "All"), hdr: img},
		{name: "cross-site ListQueues", method: http.MethodGet, params: url.Values{"Action": {"ListQueues"}}, hdr: img},
		// Scripts of the gateway's own origin, of a trusted origin, and an
		// old browser on the same host.
		{name: "same-origin fetch SendMessage", method: http.MethodPost, params: action("SendMessage", "MessageBody", "own"),
			hdr: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": self}},
		{name: "trusted origin's fetch SendMessage", method: http.MethodPost, params: action("SendMessage", "MessageBody", "trusted"),
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "https://console.example"}},
		{name: "own Origin, no Sec-Fetch-Site, SendMessage", method: http.MethodPost, params: action("SendMessage", "MessageBody", "old"), hdr: map[string]string{"Origin": self}},
		{name: "own Referer SendMessage", method: http.MethodGet, params: action("SendMessage", "MessageBody", "ref"), hdr: map[string]string{"Referer": self + "/x"}},
	}
	for _, req := range served {
		if st, body := sqsBrowserSend(t, hc, addr, req); st != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", req.name, st, body)
		}
	}
	if w, _ := counts(); w != strconv.Itoa(held+4) {
		t.Fatalf("%s waiting after the served sends, want %d", w, held+4)
	}
	// curl and the SDK: none of the browser's headers.
	if st, body := sqsBrowserSend(t, hc, addr, sqsBrowserRequest{name: "curl PurgeQueue", method: http.MethodGet, params: action("PurgeQueue")}); st != http.StatusOK {
		t.Fatalf("curl PurgeQueue: %d %s", st, body)
	}
	_ = must(c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &qurl}))(t)
}
