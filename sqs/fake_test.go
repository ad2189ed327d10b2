package sqs

// The front end's validation of sends, batches and receives, table-driven,
// over both protocols, on the fake core (internal/lmqtest/fakecore): every
// refusal is SQS's status and code, and a refused request stores (or takes)
// nothing.

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
)

// The fake core's handles have what SQS asks of the real ones.
var (
	_ Queues   = (*fakecore.Queues)(nil)
	_ Messages = (*fakecore.Messages)(nil)
	_ Inspect  = (*fakecore.Inspect)(nil)
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeServer is a Server on a fake core holding the queues "q" (standard),
// "f.fifo" (FIFO, deduplication ids required) and "c.fifo" (FIFO,
// content-based deduplication).
func fakeServer(t testing.TB) (*Server, *fakecore.Core) {
	t.Helper()
	core := fakecore.New()
	s := New(Core{Queues: core.Queues(), Messages: core.Messages(), Inspect: core.Inspect()}, Options{Logger: quietLog()})
	for _, c := range []struct {
		name  string
		attrs map[string]string
	}{
		{"q", nil},
		{"f.fifo", map[string]string{"FifoQueue": "true"}},
		{"c.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}},
	} {
		v := url.Values{"Action": {"CreateQueue"}, "QueueName": {c.name}}
		i := 0
		for k, a := range c.attrs {
			i++
			v.Set("Attribute."+strconv.Itoa(i)+".Name", k)
			v.Set("Attribute."+strconv.Itoa(i)+".Value", a)
		}
		if st, code, body := do(s, false, "CreateQueue", []byte(v.Encode())); st != http.StatusOK {
			t.Fatalf("CreateQueue %s: %d %s %s", c.name, st, code, body)
		}
	}
	return s, core
}

// do serves one request: body is a JSON object (jsonProto) or form
// parameters. It returns the status, the error code (the query protocol's,
// as SDKs read it: x-amzn-query-error in JSON) and the answer.
func do(s *Server, jsonProto bool, action string, body []byte) (int, string, string) {
	r := httptest.NewRequest(http.MethodPost, "http://sqs.local/", strings.NewReader(string(body)))
	if jsonProto {
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		r.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	} else {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	answer := w.Body.String()
	code := ""
	if w.Code != http.StatusOK {
		if jsonProto {
			code, _, _ = strings.Cut(w.Header().Get("x-amzn-query-error"), ";")
		} else {
			var e struct {
				Code string `xml:"Error>Code"`
			}
			_ = xml.Unmarshal(w.Body.Bytes(), &e)
			code = e.Code
		}
	}
	return w.Code, code, answer
}

// msg is a message to send, written in either protocol.
type msg struct {
	body             *string
	delay            *int
	groupID, dedupID string
	attrs, sysAttrs  map[string]msgAttr
}

func str(s string) *string { return &s }
func num(n int) *int       { return &n }

// json is m's fields as a JSON protocol request holds them.
func (m msg) json() map[string]any {
	o := map[string]any{}
	if m.body != nil {
		o["MessageBody"] = *m.body
	}
	if m.delay != nil {
		o["DelaySeconds"] = *m.delay
	}
	if m.groupID != "" {
		o["MessageGroupId"] = m.groupID
	}
	if m.dedupID != "" {
		o["MessageDeduplicationId"] = m.dedupID
	}
	if m.attrs != nil {
		o["MessageAttributes"] = m.attrs
	}
	if m.sysAttrs != nil {
		o["MessageSystemAttributes"] = m.sysAttrs
	}
	return o
}

// form sets m's parameters in v under prefix.
func (m msg) form(v url.Values, prefix string) {
	if m.body != nil {
		v.Set(prefix+"MessageBody", *m.body)
	}
	if m.delay != nil {
		v.Set(prefix+"DelaySeconds", strconv.Itoa(*m.delay))
	}
	if m.groupID != "" {
		v.Set(prefix+"MessageGroupId", m.groupID)
	}
	if m.dedupID != "" {
		v.Set(prefix+"MessageDeduplicationId", m.dedupID)
	}
	for kind, attrs := range map[string]map[string]msgAttr{"MessageAttribute": m.attrs, "MessageSystemAttribute": m.sysAttrs} {
		i := 0
		for _, n := range slices.Sorted(maps.Keys(attrs)) {
			a := attrs[n]
			i++
			p := prefix + kind + "." + strconv.Itoa(i) + "."
			v.Set(p+"Name", n)
			v.Set(p+"Value.DataType", a.DataType)
			if a.StringValue != "" {
				v.Set(p+"Value.StringValue", a.StringValue)
			}
			if a.BinaryValue != "" {
				v.Set(p+"Value.BinaryValue", a.BinaryValue)
			}
		}
	}
}

// sendRequest is SendMessage of m to queue in either protocol.
func sendRequest(jsonProto bool, queue string, m msg) []byte {
	if jsonProto {
		o := m.json()
		o["QueueUrl"] = queue
		b, _ := json.Marshal(o)
		return b
	}
	v := url.Values{"Action": {"SendMessage"}, "QueueUrl": {queue}}
	m.form(v, "")
	return []byte(v.Encode())
}

func TestSendValidation(t *testing.T) {
	s, core := fakeServer(t)
	stringAttr := func(v string) map[string]msgAttr {
		return map[string]msgAttr{"a": {DataType: "String", StringValue: v}}
	}
	tooMany := map[string]msgAttr{}
	for i := range 11 {
		tooMany["a"+strconv.Itoa(i)] = msgAttr{DataType: "String", StringValue: "v"}
	}
	for _, c := range []struct {
		name  string
		queue string
		m     msg
		code  string // "" for accepted
	}{
		{"plain", "q", msg{body: str("x")}, ""},
		{"no body", "q", msg{}, "MissingParameter"},
		{"empty body", "q", msg{body: str("")}, "MissingParameter"},
		{"body at the limit", "q", msg{body: str(strings.Repeat("b", defaultMaxMessage))}, ""},
		{"body over the limit", "q", msg{body: str(strings.Repeat("b", defaultMaxMessage+1))}, "InvalidParameterValue"},
		{"attributes count toward the limit", "q", msg{body: str(strings.Repeat("b", defaultMaxMessage-3)), attrs: stringAttr("v")}, "InvalidParameterValue"},
		{"delay", "q", msg{body: str("x"), delay: num(900)}, ""},
		{"negative delay", "q", msg{body: str("x"), delay: num(-1)}, "InvalidParameterValue"},
		{"delay over 900", "q", msg{body: str("x"), delay: num(901)}, "InvalidParameterValue"},
		{"dedup id on a standard queue", "q", msg{body: str("x"), dedupID: "d"}, "InvalidParameterValue"},
		{"group id on a standard queue", "q", msg{body: str("x"), groupID: "g"}, ""},
		{"bad group id on a standard queue", "q", msg{body: str("x"), groupID: "g\xff"}, "InvalidParameterValue"},
		{"FIFO", "f.fifo", msg{body: str("x"), groupID: "g", dedupID: "d1"}, ""},
		{"FIFO every punctuation", "f.fifo", msg{body: str("x"), groupID: "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", dedupID: "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"}, ""},
		{"FIFO 128 characters", "f.fifo", msg{body: str("x"), groupID: strings.Repeat("g", 128), dedupID: strings.Repeat("d", 128)}, ""},
		{"FIFO group id of 129", "f.fifo", msg{body: str("x"), groupID: strings.Repeat("g", 129), dedupID: "d2"}, "InvalidParameterValue"},
		{"FIFO dedup id of 129", "f.fifo", msg{body: str("x"), groupID: "g", dedupID: strings.Repeat("d", 129)}, "InvalidParameterValue"},
		{"FIFO dedup id with a space", "f.fifo", msg{body: str("x"), groupID: "g", dedupID: "d 3"}, "InvalidParameterValue"},
		{"FIFO dedup id 0xFF", "f.fifo", msg{body: str("x"), groupID: "g", dedupID: "\xff"}, "InvalidParameterValue"},
		{"FIFO group id non-ASCII", "f.fifo", msg{body: str("x"), groupID: "gr\u00fcn", dedupID: "d4"}, "InvalidParameterValue"},
		{"FIFO group id NUL", "f.fifo", msg{body: str("x"), groupID: "g\x00", dedupID: "d5"}, "InvalidParameterValue"},
		{"FIFO without a group", "f.fifo", msg{body: str("x"), dedupID: "d6"}, "MissingParameter"},
		{"FIFO without a dedup id", "f.fifo", msg{body: str("x"), groupID: "g"}, "InvalidParameterValue"},
		{"FIFO content-based", "c.fifo", msg{body: str("x"), groupID: "g"}, ""},
		{"FIFO with a delay", "f.fifo", msg{body: str("x"), groupID: "g", dedupID: "d7", delay: num(1)}, "InvalidParameterValue"},
		{"String attribute", "q", msg{body: str("x"), attrs: stringAttr("v")}, ""},
		{"String attribute empty", "q", msg{body: str("x"), attrs: stringAttr("")}, "InvalidParameterValue"},
		{"11 attributes", "q", msg{body: str("x"), attrs: tooMany}, "InvalidParameterValue"},
		{"attribute name AWS.", "q", msg{body: str("x"), attrs: map[string]msgAttr{"AWS.x": {DataType: "String", StringValue: "v"}}}, "InvalidParameterValue"},
		{"attribute name amazon.", "q", msg{body: str("x"), attrs: map[string]msgAttr{"amazon.x": {DataType: "String", StringValue: "v"}}}, "InvalidParameterValue"},
		{"attribute name ..", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a..b": {DataType: "String", StringValue: "v"}}}, "InvalidParameterValue"},
		{"attribute name space", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a b": {DataType: "String", StringValue: "v"}}}, "InvalidParameterValue"},
		{"attribute without type", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {StringValue: "v"}}}, "InvalidParameterValue"},
		{"attribute of unknown type", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Date", StringValue: "v"}}}, "InvalidParameterValue"},
		{"custom type", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "String.json", StringValue: "{}"}}}, ""},
		{"custom type with a space", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "String.a b", StringValue: "v"}}}, "InvalidParameterValue"},
		{"Binary", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Binary", BinaryValue: "AAEC"}}}, ""},
		{"Binary not base64", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Binary", BinaryValue: "!!"}}}, "InvalidParameterValue"},
		{"Binary empty", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Binary"}}}, "InvalidParameterValue"},
		{"Number", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number", StringValue: "-1.5e3"}}}, ""},
		{"Number.int", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number.int", StringValue: "42"}}}, ""},
		{"Number NaN", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number", StringValue: "NaN"}}}, "InvalidParameterValue"},
		{"Number Inf", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number", StringValue: "Inf"}}}, "InvalidParameterValue"},
		{"Number -Infinity", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number.float", StringValue: "-Infinity"}}}, "InvalidParameterValue"},
		{"Number hexadecimal", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number", StringValue: "0x1p-2"}}}, "InvalidParameterValue"},
		{"Number text", "q", msg{body: str("x"), attrs: map[string]msgAttr{"a": {DataType: "Number", StringValue: "one"}}}, "InvalidParameterValue"},
		{"AWSTraceHeader", "q", msg{body: str("x"), sysAttrs: map[string]msgAttr{"AWSTraceHeader": {DataType: "String", StringValue: "Root=1-5759e988-bd862e3fe1be46a994272793"}}}, ""},
		{"AWSTraceHeader as Number", "q", msg{body: str("x"), sysAttrs: map[string]msgAttr{"AWSTraceHeader": {DataType: "Number", StringValue: "1"}}}, "InvalidParameterValue"},
		{"other system attribute", "q", msg{body: str("x"), sysAttrs: map[string]msgAttr{"Other": {DataType: "String", StringValue: "v"}}}, "InvalidParameterValue"},
		{"no such queue", "nope", msg{body: str("x")}, "AWS.SimpleQueueService.NonExistentQueue"},
		{"a queue name SQS cannot address", "a.b", msg{body: str("x")}, "InvalidAddress"},
	} {
		for _, jsonProto := range []bool{true, false} {
			before := len(core.Sent())
			st, code, answer := do(s, jsonProto, "SendMessage", sendRequest(jsonProto, c.queue, c.m))
			wantStored := before
			if c.code == "" {
				wantStored++
				if st != http.StatusOK {
					t.Errorf("%s (json %v): %d %s %s, want accepted", c.name, jsonProto, st, code, answer)
				}
			} else if st != http.StatusBadRequest || code != c.code {
				t.Errorf("%s (json %v): %d %s %s, want 400 %s", c.name, jsonProto, st, code, answer, c.code)
			}
			if got := len(core.Sent()); got != wantStored {
				t.Errorf("%s (json %v): %d messages stored, want %d", c.name, jsonProto, got-before, wantStored-before)
			}
		}
	}
}

func TestSendBatchValidation(t *testing.T) {
	s, core := fakeServer(t)
	entry := func(id string, m msg) map[string]any {
		o := m.json()
		o["Id"] = id
		return o
	}
	good, bad := msg{body: str("x")}, msg{body: str("x"), attrs: map[string]msgAttr{"n": {DataType: "Number", StringValue: "NaN"}}}
	eleven := make([]map[string]any, 11)
	for i := range eleven {
		eleven[i] = entry("e"+strconv.Itoa(i), good)
	}
	for _, c := range []struct {
		name     string
		entries  []map[string]any
		code     string // "" for 200
		stored   int
		failedID string
	}{
		{"one", []map[string]any{entry("a", good)}, "", 1, ""},
		{"ten", eleven[:10], "", 10, ""},
		{"none", nil, "AWS.SimpleQueueService.EmptyBatchRequest", 0, ""},
		{"eleven", eleven, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 0, ""},
		{"id with a space", []map[string]any{entry("a b", good)}, "AWS.SimpleQueueService.InvalidBatchEntryId", 0, ""},
		{"empty id", []map[string]any{entry("", good)}, "AWS.SimpleQueueService.InvalidBatchEntryId", 0, ""},
		{"id of 81", []map[string]any{entry(strings.Repeat("i", 81), good)}, "AWS.SimpleQueueService.InvalidBatchEntryId", 0, ""},
		{"ids repeated", []map[string]any{entry("a", good), entry("a", good)}, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 0, ""},
		{"a bad entry fails alone", []map[string]any{entry("ok", good), entry("nan", bad)}, "", 1, "nan"},
		{"a bad dedup id fails alone", []map[string]any{entry("ok", good), entry("dd", msg{body: str("x"), dedupID: "d"})}, "", 1, "dd"},
	} {
		for _, jsonProto := range []bool{true, false} {
			var body []byte
			if jsonProto {
				body, _ = json.Marshal(map[string]any{"QueueUrl": "q", "Entries": c.entries})
			} else {
				v := url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {"q"}}
				for i, e := range c.entries {
					p := "SendMessageBatchRequestEntry." + strconv.Itoa(i+1) + "."
					v.Set(p+"Id", e["Id"].(string))
					// Back from the JSON form: the same message.
					var m msg
					if b, ok := e["MessageBody"].(string); ok {
						m.body = &b
					}
					m.dedupID, _ = e["MessageDeduplicationId"].(string)
					m.attrs, _ = e["MessageAttributes"].(map[string]msgAttr)
					m.form(v, p)
				}
				body = []byte(v.Encode())
			}
			before := len(core.Sent())
			st, code, answer := do(s, jsonProto, "SendMessageBatch", body)
			if c.code != "" {
				if st != http.StatusBadRequest || code != c.code {
					t.Errorf("%s (json %v): %d %s %s, want 400 %s", c.name, jsonProto, st, code, answer, c.code)
				}
			} else if st != http.StatusOK {
				t.Errorf("%s (json %v): %d %s %s", c.name, jsonProto, st, code, answer)
			}
			if got := len(core.Sent()) - before; got != c.stored {
				t.Errorf("%s (json %v): %d stored, want %d", c.name, jsonProto, got, c.stored)
			}
			if c.failedID != "" {
				want := `"Failed":[{"Id":"` + c.failedID + `","SenderFault":true,"Code":"InvalidParameterValue"`
				if !jsonProto {
					want = "<BatchResultErrorEntry><Id>" + c.failedID + "</Id><SenderFault>true</SenderFault><Code>InvalidParameterValue</Code>"
				}
				if !strings.Contains(answer, want) {
					t.Errorf("%s (json %v): %s, want the entry %s failed", c.name, jsonProto, answer, c.failedID)
				}
			}
		}
	}
}

// A refused receive takes nothing: the message stays waiting.
func TestReceiveValidation(t *testing.T) {
	s, core := fakeServer(t)
	if st, code, answer := do(s, false, "SendMessage", sendRequest(false, "q", msg{body: str("kept")})); st != http.StatusOK {
		t.Fatalf("send: %d %s %s", st, code, answer)
	}
	for _, c := range []struct {
		name   string
		params map[string]int
		code   string
	}{
		{"MaxNumberOfMessages 0", map[string]int{"MaxNumberOfMessages": 0}, "InvalidParameterValue"},
		{"MaxNumberOfMessages 11", map[string]int{"MaxNumberOfMessages": 11}, "InvalidParameterValue"},
		{"WaitTimeSeconds -1", map[string]int{"WaitTimeSeconds": -1}, "InvalidParameterValue"},
		{"WaitTimeSeconds 21", map[string]int{"WaitTimeSeconds": 21}, "InvalidParameterValue"},
		{"VisibilityTimeout -1", map[string]int{"VisibilityTimeout": -1}, "InvalidParameterValue"},
		{"VisibilityTimeout 43201", map[string]int{"VisibilityTimeout": 43201}, "InvalidParameterValue"},
	} {
		for _, jsonProto := range []bool{true, false} {
			var body []byte
			if jsonProto {
				o := map[string]any{"QueueUrl": "q"}
				for k, n := range c.params {
					o[k] = n
				}
				body, _ = json.Marshal(o)
			} else {
				v := url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {"q"}}
				for k, n := range c.params {
					v.Set(k, strconv.Itoa(n))
				}
				body = []byte(v.Encode())
			}
			st, code, answer := do(s, jsonProto, "ReceiveMessage", body)
			if st != http.StatusBadRequest || code != c.code {
				t.Errorf("%s (json %v): %d %s %s, want 400 %s", c.name, jsonProto, st, code, answer, c.code)
			}
			if n := core.Size("q"); n != 1 {
				t.Fatalf("%s (json %v): %d messages waiting after a refused receive, want 1", c.name, jsonProto, n)
			}
		}
	}
	// A query parameter that is not an integer is refused before anything.
	if st, code, _ := do(s, false, "ReceiveMessage", []byte("Action=ReceiveMessage&QueueUrl=q&MaxNumberOfMessages=1.5")); st != http.StatusBadRequest || code != "InvalidParameterValue" {
		t.Errorf("MaxNumberOfMessages=1.5: %d %s", st, code)
	}
	if st, code, _ := do(s, true, "ReceiveMessage", []byte(`{"QueueUrl":"q","MaxNumberOfMessages":"1"}`)); st != http.StatusBadRequest || code != "SerializationException" {
		t.Errorf(`JSON "MaxNumberOfMessages":"1": %d %s`, st, code)
	}
	if core.Size("q") != 1 {
		t.Fatal("a refused receive took the message")
	}

	// Receipt handles: malformed ones are ReceiptHandleIsInvalid, none at
	// all MissingParameter, for deletes and visibility changes.
	for _, c := range []struct{ action, params, code string }{
		{"DeleteMessage", "", "MissingParameter"},
		{"DeleteMessage", "&ReceiptHandle=not-a-handle", "ReceiptHandleIsInvalid"},
		{"DeleteMessage", "&ReceiptHandle=%FF", "ReceiptHandleIsInvalid"},
		{"ChangeMessageVisibility", "&ReceiptHandle=x&VisibilityTimeout=1", "ReceiptHandleIsInvalid"},
		{"ChangeMessageVisibility", "&ReceiptHandle=00000000-0000-4000-8000-000000000001", "MissingParameter"},
		{"ChangeMessageVisibility", "&ReceiptHandle=00000000-0000-4000-8000-000000000001&VisibilityTimeout=43201", "InvalidParameterValue"},
	} {
		if st, code, answer := do(s, false, c.action, []byte("Action="+c.action+"&QueueUrl=q"+c.params)); st != http.StatusBadRequest || code != c.code {
			t.Errorf("%s%s: %d %s %s, want 400 %s", c.action, c.params, st, code, answer, c.code)
		}
	}
}
