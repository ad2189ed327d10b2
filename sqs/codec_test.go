package sqs

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestMD5OfBody(t *testing.T) {
	if got := md5Hex([]byte("hello")); got != "5d41402abc4b2a76b9719d911017c592" {
		t.Fatalf("md5 of hello: %s", got)
	}
}

// TestMD5OfAttributes checks SQS's attribute digest against a value
// computed by hand from its documented encoding, and its independence of
// the attributes' order.
func TestMD5OfAttributes(t *testing.T) {
	if md5OfAttributes(nil) != "" {
		t.Fatal("no attributes: want no digest")
	}
	a := map[string]msgAttr{"Color": {DataType: "String", StringValue: "red"}}
	// \x00\x00\x00\x05Color \x00\x00\x00\x06String \x01 \x00\x00\x00\x03red
	want := md5Hex([]byte("\x00\x00\x00\x05Color\x00\x00\x00\x06String\x01\x00\x00\x00\x03red"))
	if got := md5OfAttributes(a); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	b := map[string]msgAttr{"B": {DataType: "Binary", bin: []byte{1, 2}}, "A": {DataType: "Number", StringValue: "1"}}
	want = md5Hex([]byte("\x00\x00\x00\x01A\x00\x00\x00\x06Number\x01\x00\x00\x00\x011" +
		"\x00\x00\x00\x01B\x00\x00\x00\x06Binary\x02\x00\x00\x00\x02\x01\x02"))
	if got := md5OfAttributes(b); got != want {
		t.Fatalf("sorted by name: got %s, want %s", got, want)
	}
}

func TestAttrHeaderRoundTrip(t *testing.T) {
	for _, a := range []msgAttr{
		{DataType: "String", StringValue: "red"},
		{DataType: "String.custom", StringValue: " two\nlines "},
		{DataType: "String", StringValue: `"quoted"`},
		{DataType: "Number", StringValue: "-1.5e3"},
		{DataType: "Binary", bin: []byte{0, 255, 10}},
	} {
		v := encodeAttr("MixedCase", a)
		if strings.ContainsAny(v, "\r\n") {
			t.Fatalf("%q cannot be a header value", v)
		}
		n, got, ok := decodeAttr(v)
		if !ok || n != "MixedCase" || got.DataType != a.DataType || got.StringValue != a.StringValue || string(got.bin) != string(a.bin) {
			t.Fatalf("%+v -> %q -> %s %+v %v", a, v, n, got, ok)
		}
	}
}

func TestDecodeQuery(t *testing.T) {
	v, _ := url.ParseQuery("Action=SendMessageBatch&QueueUrl=http%3A%2F%2Fh%2F000000000000%2Fq" +
		"&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two" +
		"&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one&SendMessageBatchRequestEntry.1.DelaySeconds=5" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=K&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v&AttributeName.2=B&AttributeName.1=A")
	in, err := decodeQuery(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Entries) != 2 || in.Entries[0].ID != "a" || *in.Entries[0].MessageBody != "one" || *in.Entries[0].DelaySeconds != 5 ||
		in.Entries[0].MessageAttributes["K"].StringValue != "v" || in.Entries[1].ID != "b" {
		t.Fatalf("entries %+v", in.Entries)
	}
	if strings.Join(in.AttributeNames, ",") != "A,B" {
		t.Fatalf("attribute names %v", in.AttributeNames)
	}
	if _, err := decodeQuery(url.Values{"MaxNumberOfMessages": {"x"}}); err == nil || err.Code != "InvalidParameterValue" {
		t.Fatalf("a bad number: %v", err)
	}
}

func TestWriteAnswerAndError(t *testing.T) {
	w := httptest.NewRecorder()
	if err := writeAnswer(w, false, "GetQueueAttributes", "rid", attributesOut{Attributes: attrMap{"B": "2", "A": "1"}}); err != nil {
		t.Fatal(err)
	}
	want := "<GetQueueAttributesResult><Attribute><Name>A</Name><Value>1</Value></Attribute><Attribute><Name>B</Name><Value>2</Value></Attribute></GetQueueAttributesResult>"
	if !strings.Contains(w.Body.String(), want) {
		t.Fatalf("XML %s", w.Body.String())
	}
	w = httptest.NewRecorder()
	writeError(w, true, "rid", errNoQueue("q"))
	if w.Code != 400 || w.Header().Get("x-amzn-query-error") != "AWS.SimpleQueueService.NonExistentQueue;Sender" ||
		!strings.Contains(w.Body.String(), `"__type":"com.amazonaws.sqs#QueueDoesNotExist"`) {
		t.Fatalf("JSON error %d %v %s", w.Code, w.Header(), w.Body.String())
	}
}

func TestQueueNamesAndURLs(t *testing.T) {
	s := New(Core{}, Options{})
	for name, ok := range map[string]bool{"a": true, "a-b_C9": true, "x.fifo": true, ".fifo": false, "a.b": false, "": false,
		strings.Repeat("a", 80): true, strings.Repeat("a", 81): false} {
		if validQueueName(name) != ok {
			t.Errorf("validQueueName(%q) = %v", name, !ok)
		}
	}
	if n, err := s.nameOfURL("https://elsewhere:1/000000000000/q1"); err != nil || n != "q1" {
		t.Fatalf("%s %v", n, err)
	}
	if _, err := s.nameOfURL("http://h/111111111111/q1"); err == nil {
		t.Fatal("another account accepted")
	}
	if n, ok := s.nameOfARN("arn:aws:sqs:eu-west-1:000000000000:dlq"); !ok || n != "dlq" {
		t.Fatalf("%s %v", n, ok)
	}
}
