package sqs

// Fuzz targets of the SQS front end's decoders of outside bytes: the query
// protocol's form, the JSON protocol's body, message attributes, receipt
// handles, queue URLs and ARNs, and whole actions (batch entries, redrive
// policies) through ServeHTTP on the fake core. .ci/run runs each. Their
// seeds are the hostile inputs of issue 40 (items 1 to 5) and of the
// table tests.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/alloctest"
)

// querySeeds are query protocol requests (form bodies or URL queries).
var querySeeds = []string{
	"Action=PurgeQueue&QueueUrl=jobs",
	"Action=DeleteQueue&QueueUrl=http%3A%2F%2F127.0.0.1%3A9324%2F000000000000%2Fjobs",
	"Action=GetQueueAttributes&QueueUrl=a-ps&AttributeName.1=All&X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=AKID%2F20240101%2Fus-east-1%2Fsqs%2Faws4_request&X-Amz-Date=20240101T000000Z" +
		"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=00",
	"Action=SendMessage&QueueUrl=a-ps2&MessageBody=x",
	"Action=SetQueueAttributes&QueueUrl=a-src&Attribute.1.Name=RedrivePolicy" +
		"&Attribute.1.Value=%7B%22deadLetterTargetArn%22%3A%22arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3Ab-missing%22%2C%22maxReceiveCount%22%3A3%7D",
	"Action=CreateQueue&QueueName=a-new&Attribute.1.Name=RedrivePolicy&Attribute.1.Value=%7B%7D",
	"Action=SendMessage&QueueUrl=v.fifo&MessageBody=x&MessageGroupId=g&MessageDeduplicationId=%FF",
	"Action=SendMessage&QueueUrl=v.fifo&MessageBody=x&MessageGroupId=%FF&MessageDeduplicationId=d",
	"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=n&MessageAttribute.1.Value.DataType=Number&MessageAttribute.1.Value.StringValue=NaN",
	"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=n&MessageAttribute.1.Value.DataType=Number&MessageAttribute.1.Value.StringValue=0x1p-2",
	"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=n&MessageAttribute.1.Value.DataType=Number.f&MessageAttribute.1.Value.StringValue=-Infinity",
	"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=b&MessageAttribute.1.Value.DataType=Binary&MessageAttribute.1.Value.BinaryValue=AAEC",
	"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageSystemAttribute.1.Name=AWSTraceHeader&MessageSystemAttribute.1.Value.DataType=String&MessageSystemAttribute.1.Value.StringValue=Root%3D1",
	"Action=SendMessageBatch&QueueUrl=q&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one" +
		"&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two&SendMessageBatchRequestEntry.2.DelaySeconds=5",
	"Action=SendMessageBatch&QueueUrl=q&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=n&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=Number" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=Inf",
	"Action=SendMessageBatch&QueueUrl=q&SendMessageBatchRequestEntry.99999999999999999999.Id=a&SendMessageBatchRequestEntry.-1.Id=b",
	"Action=DeleteMessageBatch&QueueUrl=q&DeleteMessageBatchRequestEntry.1.Id=a&DeleteMessageBatchRequestEntry.1.ReceiptHandle=00000000-0000-4000-8000-000000000001",
	"Action=ChangeMessageVisibilityBatch&QueueUrl=q&ChangeMessageVisibilityBatchRequestEntry.1.Id=a" +
		"&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=x&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=1e3",
	"Action=ReceiveMessage&QueueUrl=q&MaxNumberOfMessages=99999999999999999999&WaitTimeSeconds=-1&AttributeName.2=All&AttributeName.1=SenderId",
	"Action=ListQueues&QueueNamePrefix=a-&MaxResults=0&NextToken=%FF",
	"Action=TagQueue&QueueUrl=q&Tag.1.Key=k&Tag.1.Value=v&Tag.1.Key=k2",
	"Action=UntagQueue&QueueUrl=q&TagKey.1=k&TagKey.x=y",
	"MaxResults=1;x=2", "%", "a=%zz", "&&&=&=", "Action",
}

// jsonSeeds are JSON protocol bodies.
var jsonSeeds = []string{
	`{"QueueUrl":"q","MessageBody":"x"}`,
	`{"QueueUrl":"v.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"` + "\xff" + `"}`,
	`{"QueueUrl":"v.fifo","MessageBody":"x","MessageGroupId":"has space","MessageDeduplicationId":"d"}`,
	`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"n":{"DataType":"Number","StringValue":"NaN"}}}`,
	`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"n":{"DataType":"Number","StringValue":"1e127"}}}`,
	`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"b":{"DataType":"Binary","BinaryValue":"!!"}}}`,
	`{"QueueUrl":"q","Entries":[{"Id":"good","MessageBody":"x"},{"Id":"bad","MessageBody":"x","MessageAttributes":{"n":{"DataType":"Number","StringValue":"Inf"}}}]}`,
	`{"QueueUrl":"q","Entries":[{"Id":"a","ReceiptHandle":"00000000-0000-4000-8000-000000000001","VisibilityTimeout":-1}]}`,
	`{"QueueUrl":"a-src","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:b-exists\",\"maxReceiveCount\":\"3\"}"}}`,
	`{"QueueUrl":"a-src","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":1,\"maxReceiveCount\":[]}"}}`,
	`{"QueueName":"a-new","Attributes":{"FifoQueue":"true"},"tags":{"k":"v"}}`,
	`{"QueueUrl":"q","MaxNumberOfMessages":"1"}`,
	`{"QueueUrl":"q","MaxNumberOfMessages":1e400}`,
	`{"QueueUrl":"q","ReceiptHandle":"{00000000-0000-4000-8000-000000000001}"}`,
	`{"Entries":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]}`,
	`{"QueueUrl":"q"} {"QueueUrl":"r"}`,
	`"\ud800"`, `null`, ``, `[]`,
}

// checkQueueURL: a QueueUrl that reads as a name reads as a name SQS
// accepts, and the URL the gateway gives for that name reads back as it.
func checkQueueURL(t *testing.T, s *Server, raw string) {
	t.Helper()
	name, ae := s.nameOfURL(raw)
	if ae != nil {
		if ae.Status != http.StatusBadRequest || (ae.Code != "InvalidAddress" && ae.Code != "MissingParameter") {
			t.Fatalf("QueueUrl %q: %+v", raw, ae)
		}
		return
	}
	if !validQueueName(name) {
		t.Fatalf("QueueUrl %q read as the name %q, which SQS does not accept", raw, name)
	}
	for _, u := range []string{s.queueURL("http", "h:1", name), name} {
		if again, ae := s.nameOfURL(u); ae != nil || again != name {
			t.Fatalf("the URL %q of %q reads back as %q, %v", u, name, again, ae)
		}
	}
	if again, ok := s.nameOfARN(s.queueARN(name)); !ok || again != name {
		t.Fatalf("the ARN of %q reads back as %q, %v", name, again, ok)
	}
}

// checkReceipt: an accepted receipt handle is a UUID (what the core's
// delivery ids are), bounded; a refusal is SQS's.
func checkReceipt(t *testing.T, h string) {
	t.Helper()
	err := receipt(h)
	if err != nil {
		ae := apiErrorOf(err)
		if ae.Status != http.StatusBadRequest || (ae.Code != "ReceiptHandleIsInvalid" && ae.Code != "MissingParameter") {
			t.Fatalf("receipt handle %q: %+v", h, ae)
		}
		return
	}
	if _, err := uuid.Parse(h); err != nil || len(h) > 45 {
		t.Fatalf("receipt handle %q accepted: %v", h, err)
	}
}

// checkAttr: an attribute check accepts is one of SQS's types with a value
// of that type, checks again the same, and travels through its stored
// header (encodeAttr, decodeAttr) unchanged, as a header can carry it.
func checkAttr(t *testing.T, name string, a msgAttr) {
	t.Helper()
	ae := a.check(name)
	if ae != nil {
		if ae.Status != http.StatusBadRequest || ae.Code != "InvalidParameterValue" {
			t.Fatalf("attribute %q %+v: %+v", name, a, ae)
		}
		return
	}
	base, _, _ := strings.Cut(a.DataType, ".")
	switch base {
	case "String":
		if a.StringValue == "" {
			t.Fatalf("attribute %q: an empty String accepted", name)
		}
	case "Number":
		if !validNumber(a.StringValue) {
			t.Fatalf("attribute %q: Number %q accepted", name, a.StringValue)
		}
		// Within SQS's range, every Number is a finite float64.
		f, err := strconv.ParseFloat(a.StringValue, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			t.Fatalf("attribute %q: Number %q accepted, which is %v, %v as a float", name, a.StringValue, f, err)
		}
	case "Binary":
		if len(a.bin) == 0 || len(a.bin) > base64.StdEncoding.DecodedLen(len(a.BinaryValue)) {
			t.Fatalf("attribute %q: %d bytes from %d of base64", name, len(a.bin), len(a.BinaryValue))
		}
	default:
		t.Fatalf("attribute %q of type %q accepted", name, a.DataType)
	}
	again := a
	if ae := again.check(name); ae != nil {
		t.Fatalf("attribute %q %+v: accepted, then refused: %v", name, a, ae)
	}
	if !validAttrName(name) {
		return // send refuses the name before storing anything
	}
	h := encodeAttr(name, a)
	if strings.ContainsAny(h, "\r\n\x00") {
		t.Fatalf("attribute %q %+v: header value %q", name, a, h)
	}
	n, got, ok := decodeAttr(h)
	if !ok || n != name || got.DataType != a.DataType || !bytes.Equal(got.bin, a.bin) || (!a.binary() && got.StringValue != a.StringValue) {
		t.Fatalf("attribute %q %+v: stored as %q, read back as %q %+v %v", name, a, h, n, got, ok)
	}
	_ = md5OfAttributes(map[string]msgAttr{name: a})
}

// sqsMessageID is SQS's documented MessageGroupId and
// MessageDeduplicationId: 1 to 128 of a-z, A-Z, 0-9 and punctuation.
var sqsMessageID = regexp.MustCompile("^[a-zA-Z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")

// checkInput checks every decoded part of a request as the handlers would
// take it: its QueueUrl, receipt handles, attributes and batch entries; and
// that the request, written as JSON, decodes to itself (what the query
// protocol decodes, the JSON protocol can say).
func checkInput(t *testing.T, s *Server, in *input, size int) {
	t.Helper()
	b1, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("a decoded request does not encode: %v", err)
	}
	// Once through JSON (where bytes that are not UTF-8 become U+FFFD),
	// the request stays the same.
	in2, ae := decodeJSON(b1)
	if ae != nil {
		t.Fatalf("%s does not decode again: %v", b1, ae)
	}
	b2, _ := json.Marshal(in2)
	in3, ae := decodeJSON(b2)
	if ae != nil {
		t.Fatalf("%s does not decode again: %v", b2, ae)
	}
	if !reflect.DeepEqual(in2, in3) {
		t.Fatalf("round trip: %s, then %s", b1, b2)
	}
	if in.QueueURL != "" {
		checkQueueURL(t, s, in.QueueURL)
	}
	if in.ReceiptHandle != "" {
		checkReceipt(t, in.ReceiptHandle)
	}
	if len(in.Entries) > size {
		t.Fatalf("%d batch entries from %d bytes", len(in.Entries), size)
	}
	if checkBatch(in.Entries) == nil {
		if len(in.Entries) < 1 || len(in.Entries) > maxBatch {
			t.Fatalf("a batch of %d entries accepted", len(in.Entries))
		}
		ids := map[string]bool{}
		for _, e := range in.Entries {
			if ids[e.ID] || e.ID == "" || len(e.ID) > 80 {
				t.Fatalf("batch entry id %q accepted (ids %v)", e.ID, ids)
			}
			ids[e.ID] = true
		}
	}
	entries := append([]sendEntry{in.sendEntry}, make([]sendEntry, 0, len(in.Entries))...)
	for _, e := range in.Entries {
		entries = append(entries, e.sendEntry)
		checkReceipt(t, e.ReceiptHandle)
	}
	for _, e := range entries {
		for n, a := range e.MessageAttributes {
			checkAttr(t, n, a)
		}
		for n, a := range e.MessageSystemAttributes {
			checkAttr(t, n, a)
		}
		for _, id := range []string{e.MessageGroupID, e.MessageDeduplicationID} {
			if validMessageID(id) != sqsMessageID.MatchString(id) {
				t.Fatalf("id %q: validMessageID says %v", id, validMessageID(id))
			}
		}
	}
}

// FuzzDecodeQuery: a query protocol form either does not parse (400
// MalformedQueryString in ServeHTTP) or decodes, with memory in proportion
// to its bytes, into a request whose parts check as the handlers take
// them; a refusal is InvalidParameterValue (a number that is not one).
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range querySeeds {
		f.Add(s)
	}
	s := New(Core{}, Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		var in *input
		var ae *apiError
		var perr error
		if a := alloctest.HeapAllocated(func() {
			var v url.Values
			if v, perr = url.ParseQuery(raw); perr == nil {
				in, ae = decodeQuery(v)
			}
		}); a > 256*uint64(len(raw))+256<<10 {
			t.Fatalf("decoding %d bytes allocated %d", len(raw), a)
		}
		if perr != nil {
			return
		}
		if ae != nil {
			if ae.Status != http.StatusBadRequest || ae.Code != "InvalidParameterValue" {
				t.Fatalf("%q: %+v", raw, ae)
			}
			return
		}
		checkInput(t, s, in, len(raw))
	})
}

// FuzzDecodeJSON: a JSON protocol body either is refused (400
// SerializationException) or decodes, with memory in proportion, into a
// request whose parts check as the handlers take them.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	s := New(Core{}, Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var in *input
		var ae *apiError
		if a := alloctest.HeapAllocated(func() { in, ae = decodeJSON(body) }); a > 512*uint64(len(body))+256<<10 {
			t.Fatalf("decoding %d bytes allocated %d", len(body), a)
		}
		if ae != nil {
			if ae.Status != http.StatusBadRequest || ae.Code != "SerializationException" {
				t.Fatalf("%q: %+v", body, ae)
			}
			return
		}
		checkInput(t, s, in, len(body))
	})
}

// FuzzMessageAttribute: what check accepts is SQS's, and is stored and read
// back unchanged.
func FuzzMessageAttribute(f *testing.F) {
	for _, c := range [][4]string{
		{"n", "Number", "NaN", ""}, {"n", "Number", "Inf", ""}, {"n", "Number", "-Infinity", ""},
		{"n", "Number", "0x1p-2", ""}, {"n", "Number", "1_000", ""}, {"n", "Number.f", "1e126", ""},
		{"n", "Number", "1e127", ""}, {"n", "Number", "-1e-128", ""}, {"n", "Number", "12345678901234567890123456789012345678", ""},
		{"n", "Number", "1234567890123456789012345678901234567890", ""}, {"n", "Number", "+.5e-0", ""},
		{"s", "String", " two\nlines ", ""}, {"s", "String", `"quoted`, ""}, {"s", "String.x", "a;b;c", ""},
		{"s", "String", "\xff\x00", ""}, {"b", "Binary", "", "AAEC"}, {"b", "Binary", "", "!!"},
		{"b", "Binary.png", "", "AA\r\nEC"}, {"b", "Binary", "", "AA=="}, {"x", "Date", "1", ""},
		{"x", "", "v", ""}, {"x", "String..a", "v", ""}, {"AWS.x", "String", "v", ""}, {"a;b", "String", "v", ""},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, name, dataType, stringValue, binaryValue string) {
		checkAttr(t, name, msgAttr{DataType: dataType, StringValue: stringValue, BinaryValue: binaryValue})
	})
}

// FuzzQueueURL: QueueUrl and ARN parsing.
func FuzzQueueURL(f *testing.F) {
	for _, s := range []string{
		"jobs", "/000000000000/jobs", "http://127.0.0.1:9324/000000000000/jobs", "https://h/111111111111/q",
		"http://h/000000000000/q/extra", "http://[::1/000000000000/q", "http://h/000000000000/", "000000000000/x.fifo",
		"%2F000000000000%2Fq", "http://h/000000000000/" + strings.Repeat("a", 81), "http://h/000000000000/a.b",
		"arn:aws:sqs:us-east-1:000000000000:b-missing", "arn:aws:sqs:us-east-1:000000000000:a:b", "\xff", "",
	} {
		f.Add(s)
	}
	s := New(Core{}, Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		checkQueueURL(t, s, raw)
		if name, ok := s.nameOfARN(raw); ok {
			if !validQueueName(name) || s.queueARN(name) != "arn:aws:sqs:"+s.opts.Region+":"+s.opts.Account+":"+name {
				t.Fatalf("ARN %q read as %q", raw, name)
			}
		}
	})
}

// FuzzReceiptHandle: receipt handles as DeleteMessage and
// ChangeMessageVisibility take them.
func FuzzReceiptHandle(f *testing.F) {
	for _, s := range []string{
		"00000000-0000-4000-8000-000000000001", "{00000000-0000-4000-8000-000000000001}",
		"urn:uuid:00000000-0000-4000-8000-000000000001", "00000000000040008000000000000001", "not-a-handle", "\xff", "",
		strings.Repeat("0", 4096),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) { checkReceipt(t, h) })
}

// fuzzActions are the actions FuzzActions serves: none of them waits (a
// receive may, up to 20 s).
var fuzzActions = []string{"SendMessage", "SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch",
	"SetQueueAttributes", "CreateQueue", "GetQueueAttributes", "ListDeadLetterSourceQueues", "TagQueue", "ListQueues"}

// FuzzActions serves any body as one of fuzzActions, in either protocol,
// on the fake core: never a 5xx; an answer in the request's protocol; as
// many messages stored as the answer says were sent; and every stored
// message's SQS headers read back to what send accepts.
func FuzzActions(f *testing.F) {
	for _, s := range querySeeds {
		action := url.Values{}
		if v, err := url.ParseQuery(s); err == nil {
			action = v
		}
		for i, a := range fuzzActions {
			if a == action.Get("Action") {
				f.Add(uint8(i), false, []byte(s))
			}
		}
		f.Add(uint8(0), false, []byte(s))
	}
	for _, s := range jsonSeeds {
		f.Add(uint8(0), true, []byte(s))
		f.Add(uint8(1), true, []byte(s))
		f.Add(uint8(4), true, []byte(s))
	}
	f.Fuzz(func(t *testing.T, ai uint8, jsonProto bool, body []byte) {
		s, core := fakeServer(t)
		action := fuzzActions[int(ai)%len(fuzzActions)]
		before := len(core.Sent())
		st, code, answer := do(s, jsonProto, action, body)
		if !jsonProto {
			// The query protocol's action is the body's.
			v, _ := url.ParseQuery(string(body))
			action = v.Get("Action")
		}
		if st >= 500 {
			t.Fatalf("%s %q: %d %s %s", action, body, st, code, answer)
		}
		if jsonProto {
			if !json.Valid([]byte(answer)) {
				t.Fatalf("%s %q: answer is not JSON: %s", action, body, answer)
			}
		} else if err := xml.Unmarshal([]byte(answer), new(struct{})); err != nil {
			t.Fatalf("%s %q: answer is not XML (%v): %s", action, body, err, answer)
		}
		sent := 0
		if st == http.StatusOK {
			switch action {
			case "SendMessage":
				sent = 1
			case "SendMessageBatch":
				sent = strings.Count(answer, `"MessageId"`) + strings.Count(answer, "<MessageId>")
			}
		}
		stored := core.Sent()[before:]
		if len(stored) != sent {
			t.Fatalf("%s %q: %d stored, the answer (%d) says %d: %s", action, body, len(stored), st, sent, answer)
		}
		for _, m := range stored {
			if len(m.Body) == 0 || len(m.Body) > len(body) {
				t.Fatalf("%s: a body of %d bytes stored from a request of %d", action, len(m.Body), len(body))
			}
			for _, h := range m.Kept {
				switch name := strings.ToLower(h.Name); {
				case name == hdrDedupID:
					if !validMessageID(h.Value) {
						t.Fatalf("deduplication id %q stored", h.Value)
					}
				case strings.HasPrefix(name, hdrAttr), strings.HasPrefix(name, hdrSys):
					n, a, ok := decodeAttr(h.Value)
					if !ok {
						t.Fatalf("stored attribute header %q does not read back", h.Value)
					}
					if a.binary() {
						a.BinaryValue = base64.StdEncoding.EncodeToString(a.bin)
					}
					if ae := a.check(n); ae != nil || !validAttrName(n) {
						t.Fatalf("stored attribute %q %+v does not check: %v", n, a, ae)
					}
				}
			}
		}
	})
}
