package sqs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The two wire protocols SQS clients speak decode into one input and encode
// one output: AWS JSON 1.0 (current SDKs) and the query protocol (form
// parameters in, XML out; older SDKs and CLIs).

// input is every parameter of every action, as the JSON protocol names them.
type input struct {
	QueueName       string            `json:"QueueName"`
	QueueURL        string            `json:"QueueUrl"`
	QueueNamePrefix string            `json:"QueueNamePrefix"`
	NextToken       string            `json:"NextToken"`
	MaxResults      *int              `json:"MaxResults"`
	Attributes      map[string]string `json:"Attributes"`
	// CreateQueue's tags are "tags" in JSON, TagQueue's "Tags".
	CreateTags     map[string]string `json:"tags"`
	Tags           map[string]string `json:"Tags"`
	TagKeys        []string          `json:"TagKeys"`
	AttributeNames []string          `json:"AttributeNames"`

	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	ReceiptHandle               string   `json:"ReceiptHandle"`

	sendEntry
	Entries []batchEntry `json:"Entries"`
}

// sendEntry is one message to send (SendMessage, an entry of a batch).
type sendEntry struct {
	MessageBody             *string            `json:"MessageBody"`
	DelaySeconds            *int               `json:"DelaySeconds"`
	MessageAttributes       map[string]msgAttr `json:"MessageAttributes"`
	MessageSystemAttributes map[string]msgAttr `json:"MessageSystemAttributes"`
	MessageDeduplicationID  string             `json:"MessageDeduplicationId"`
	MessageGroupID          string             `json:"MessageGroupId"`
}

// batchEntry is an entry of SendMessageBatch, DeleteMessageBatch or
// ChangeMessageVisibilityBatch.
type batchEntry struct {
	ID string `json:"Id"`
	sendEntry
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

// msgAttr is a message attribute. BinaryValue is base64 on both wires; bin
// is its decoded value (check fills it).
type msgAttr struct {
	DataType    string `json:"DataType" xml:"DataType"`
	StringValue string `json:"StringValue,omitempty" xml:"StringValue,omitempty"`
	BinaryValue string `json:"BinaryValue,omitempty" xml:"BinaryValue,omitempty"`
	bin         []byte
}

// decodeJSON reads a JSON protocol body.
func decodeJSON(body []byte) (*input, *apiError) {
	in := &input{}
	if len(bytes.TrimSpace(body)) == 0 {
		return in, nil
	}
	if err := json.Unmarshal(body, in); err != nil {
		return nil, errorf(400, "SerializationException", "the request body is not valid JSON for this action: %v", err)
	}
	return in, nil
}

// decodeQuery reads query protocol parameters (form or URL).
func decodeQuery(v url.Values) (*input, *apiError) {
	in := &input{
		QueueName:       v.Get("QueueName"),
		QueueURL:        v.Get("QueueUrl"),
		QueueNamePrefix: v.Get("QueueNamePrefix"),
		NextToken:       v.Get("NextToken"),
		ReceiptHandle:   v.Get("ReceiptHandle"),
	}
	var bad *apiError
	num := intParam(v, &bad)
	in.MaxResults = num("MaxResults")
	in.MaxNumberOfMessages = num("MaxNumberOfMessages")
	in.WaitTimeSeconds = num("WaitTimeSeconds")
	in.VisibilityTimeout = num("VisibilityTimeout")
	in.Attributes = pairs(v, "Attribute", "Name", "Value")
	in.Tags = pairs(v, "Tag", "Key", "Value")
	in.CreateTags = in.Tags
	in.TagKeys = list(v, "TagKey")
	in.AttributeNames = list(v, "AttributeName")
	in.MessageSystemAttributeNames = list(v, "MessageSystemAttributeName")
	in.MessageAttributeNames = list(v, "MessageAttributeName")
	in.sendEntry = querySend(v, num)
	for _, prefix := range []string{"SendMessageBatchRequestEntry", "DeleteMessageBatchRequestEntry", "ChangeMessageVisibilityBatchRequestEntry"} {
		for _, ev := range indexed(v, prefix) {
			e := batchEntry{ID: ev.Get("Id"), ReceiptHandle: ev.Get("ReceiptHandle")}
			e.sendEntry = querySend(ev, intParam(ev, &bad))
			if s := ev.Get("VisibilityTimeout"); s != "" {
				n, err := strconv.Atoi(s)
				if err != nil && bad == nil {
					bad = errInvalid("Value %s for parameter VisibilityTimeout is invalid. Reason: must be an integer.", s)
				}
				e.VisibilityTimeout = &n
			}
			in.Entries = append(in.Entries, e)
		}
	}
	if bad != nil {
		return nil, bad
	}
	return in, nil
}

// querySend reads a message's parameters from v (a request's, or a batch
// entry's).
func querySend(v url.Values, num func(string) *int) sendEntry {
	e := sendEntry{
		DelaySeconds:           num("DelaySeconds"),
		MessageDeduplicationID: v.Get("MessageDeduplicationId"),
		MessageGroupID:         v.Get("MessageGroupId"),
	}
	if vs, ok := v["MessageBody"]; ok && len(vs) > 0 {
		e.MessageBody = &vs[0]
	}
	attrs := func(prefix string) map[string]msgAttr {
		var m map[string]msgAttr
		for _, av := range indexed(v, prefix) {
			if m == nil {
				m = make(map[string]msgAttr)
			}
			m[av.Get("Name")] = msgAttr{
				DataType:    av.Get("Value.DataType"),
				StringValue: av.Get("Value.StringValue"),
				BinaryValue: av.Get("Value.BinaryValue"),
			}
		}
		return m
	}
	e.MessageAttributes = attrs("MessageAttribute")
	e.MessageSystemAttributes = attrs("MessageSystemAttribute")
	return e
}

// indexed returns the parameters "prefix.N.rest" of v grouped by N (in N's
// order), each group keyed by rest.
func indexed(v url.Values, prefix string) []url.Values {
	groups := make(map[int]url.Values)
	for k, vs := range v {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		ns, sub, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil {
			continue
		}
		if groups[n] == nil {
			groups[n] = url.Values{}
		}
		groups[n][sub] = vs
	}
	keys := make([]int, 0, len(groups))
	for n := range groups {
		keys = append(keys, n)
	}
	sort.Ints(keys)
	out := make([]url.Values, len(keys))
	for i, n := range keys {
		out[i] = groups[n]
	}
	return out
}

// pairs reads "prefix.N.key" / "prefix.N.value" parameters as a map.
func pairs(v url.Values, prefix, key, value string) map[string]string {
	var m map[string]string
	for _, g := range indexed(v, prefix) {
		if m == nil {
			m = make(map[string]string)
		}
		m[g.Get(key)] = g.Get(value)
	}
	return m
}

// list reads "prefix.N" parameters in N's order.
func list(v url.Values, prefix string) []string {
	type item struct {
		n int
		s string
	}
	var items []item
	for k, vs := range v {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || len(vs) == 0 {
			continue
		}
		items = append(items, item{n, vs[0]})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.s
	}
	return out
}

// attrMap is a map the query protocol writes as <Attribute><Name/><Value/>
// elements (the JSON protocol as an object).
type attrMap map[string]string

func (m attrMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return marshalPairs(e, start.Name.Local, "Name", "Value", m)
}

// tagMap is a map the query protocol writes as <Tag><Key/><Value/>.
type tagMap map[string]string

func (m tagMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return marshalPairs(e, start.Name.Local, "Key", "Value", m)
}

func marshalPairs(e *xml.Encoder, elem, key, value string, m map[string]string) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := struct {
			XMLName xml.Name
			K       string `xml:",innerxml"`
		}{XMLName: xml.Name{Local: elem}}
		var b strings.Builder
		for _, kv := range [][2]string{{key, k}, {value, m[k]}} {
			b.WriteString("<" + kv[0] + ">")
			_ = xml.EscapeText(&b, []byte(kv[1]))
			b.WriteString("</" + kv[0] + ">")
		}
		v.K = b.String()
		if err := e.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// msgAttrMap is a message's attributes: <MessageAttribute><Name/><Value>
// <DataType/><StringValue/></Value></MessageAttribute> in the query protocol.
type msgAttrMap map[string]msgAttr

func (m msgAttrMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := struct {
			XMLName xml.Name
			Name    string  `xml:"Name"`
			Value   msgAttr `xml:"Value"`
		}{XMLName: xml.Name{Local: start.Name.Local}, Name: k, Value: m[k]}
		if err := e.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// xmlNS is the query protocol's namespace.
const xmlNS = "http://queue.amazonaws.com/doc/2012-11-05/"

// writeAnswer writes out, the result of action, in the request's protocol.
func writeAnswer(w http.ResponseWriter, jsonProto bool, action, requestID string, out any) error {
	if jsonProto {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if out == nil {
			out = struct{}{}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	w.Header().Set("Content-Type", "text/xml")
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?>` + "\n<" + action + `Response xmlns="` + xmlNS + `">`)
	if out != nil {
		start := xml.StartElement{Name: xml.Name{Local: action + "Result"}}
		if err := xml.NewEncoder(&b).EncodeElement(out, start); err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
	}
	b.WriteString("<ResponseMetadata><RequestId>" + requestID + "</RequestId></ResponseMetadata></" + action + "Response>")
	_, err := w.Write(b.Bytes())
	return err
}

// writeError writes e in the request's protocol.
func writeError(w http.ResponseWriter, jsonProto bool, requestID string, e *apiError) {
	fault := "Sender"
	if !e.sender() {
		fault = "Receiver"
	}
	w.Header().Set("x-amzn-RequestId", requestID)
	if jsonProto {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		// SDKs read the query protocol's code from this header (SQS is
		// "awsQueryCompatible"), the error's shape from __type.
		w.Header().Set("x-amzn-query-error", e.Code+";"+fault)
		w.WriteHeader(e.Status)
		b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + e.Shape, "message": e.Message})
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.Status)
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?>` + "\n<ErrorResponse><Error><Type>" + fault + "</Type><Code>")
	_ = xml.EscapeText(&b, []byte(e.Code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(e.Message))
	b.WriteString("</Message><Detail/></Error><RequestId>" + requestID + "</RequestId></ErrorResponse>")
	_, _ = w.Write(b.Bytes())
}

// check validates a message attribute and decodes its binary value.
func (a *msgAttr) check(name string) *apiError {
	if a.DataType == "" {
		return errInvalid("The message attribute '%s' must contain a non-empty message attribute type.", name)
	}
	if !validAttrName(a.DataType) || len(a.DataType) > 256 {
		return errInvalid("The message attribute '%s' has an invalid message attribute type.", name)
	}
	base, _, _ := strings.Cut(a.DataType, ".")
	switch base {
	case "String", "Number":
		if a.StringValue == "" {
			return errInvalid("The message attribute '%s' with type '%s' must use field 'String'.", name, base)
		}
		if base == "Number" && !validNumber(a.StringValue) {
			return errInvalid("Can't cast the value of message (user) attribute '%s' to a number.", name)
		}
	case "Binary":
		b, err := base64.StdEncoding.DecodeString(a.BinaryValue)
		if err != nil || len(b) == 0 {
			return errInvalid("The message attribute '%s' with type 'Binary' must use field 'Binary' (base64).", name)
		}
		a.bin = b
	default:
		return errInvalid("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
	}
	return nil
}

// SQS's Number attributes: decimal numbers of up to 38 significant digits
// whose magnitude is from 10^-128 to 10^126 (or zero).
const (
	maxNumberDigits = 38
	minNumberExp    = -128
	maxNumberExp    = 126
)

// validNumber reports whether s is a Number attribute's value SQS accepts:
// an optional sign, digits with an optional fraction (".5" and "5." too),
// an optional exponent (e or E, optional sign, digits); at most
// maxNumberDigits significant digits (leading and trailing zeros do not
// count), a magnitude from 10^minNumberExp to 10^maxNumberExp, or zero.
// strconv.ParseFloat would take NaN, Inf, hexadecimal ("0x1p-2") and
// underscores, which SQS refuses, and round away digits SQS keeps.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	// The mantissa's digits, the point aside: first and last index the
	// first and last non-zero ones among them, lead is the first's value.
	first, last, digits, intDigits := -1, -1, 0, -1
	var lead byte
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && intDigits < 0 {
			intDigits = digits
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		if c != '0' {
			if first < 0 {
				first, lead = digits, c
			}
			last = digits
		}
		digits++
	}
	if digits == 0 {
		return false
	}
	if intDigits < 0 {
		intDigits = digits
	}
	// The exponent, clamped: beyond the clamp the value is out of range
	// anyway (a request holds at most a few MiB of digits).
	const clamp = 1 << 40
	exp := int64(0)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if exp < clamp {
				exp = exp*10 + int64(s[i]-'0')
			}
		}
		if i == start {
			return false
		}
		if neg {
			exp = -exp
		}
	}
	if i != len(s) {
		return false
	}
	if first < 0 {
		return true // zero, whatever its exponent
	}
	if last-first+1 > maxNumberDigits {
		return false
	}
	// The value is d.ddd… × 10^mag, d the first non-zero digit.
	mag := int64(intDigits-1-first) + exp
	if mag == maxNumberExp {
		return first == last && lead == '1' // 10^126 itself
	}
	return minNumberExp <= mag && mag < maxNumberExp
}

// validMessageID reports whether s is a MessageDeduplicationId or
// MessageGroupId SQS accepts: 1 to 128 alphanumeric or punctuation
// characters (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), i.e. printable ASCII
// without the space. Anything else (a space, a byte such as 0xFF that the
// query protocol carries as it is) is refused before anything is stored.
func validMessageID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validAttrName reports whether s is a valid message attribute name (or
// data type): up to 256 of [A-Za-z0-9_.-], not starting with "AWS." or
// "Amazon." (checked by the caller), no "..", not starting or ending with
// ".".
func validAttrName(s string) bool {
	if s == "" || len(s) > 256 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// intParam reads integer parameters of v: nil when absent; a value that is
// not an integer sets *bad (the first one only).
func intParam(v url.Values, bad **apiError) func(name string) *int {
	return func(name string) *int {
		s := v.Get(name)
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil && *bad == nil {
			*bad = errInvalid("Value %s for parameter %s is invalid. Reason: must be an integer.", s, name)
		}
		return &n
	}
}
