package sqs

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// A message's SQS attributes are stored as kept headers (NATS headers
// "Lmq-Keep-<name>", given back to LMQ HTTP clients as "<name>"), so that
// LMQ clients and NATS programs see them:
//
//	x-sqs-attr-<name>   a message attribute: "<Name>;<DataType>;<value>"
//	x-sqs-sys-<name>    a system attribute (AWSTraceHeader), the same way
//	x-sqs-message-id    the MessageId
//	x-sqs-sender-id     the SenderId
//	x-sqs-dedup-id      the MessageDeduplicationId (FIFO)
//
// Header names lose their case in the store, and SQS's attribute names are
// case-sensitive: the exact name opens the value. Binary values are base64;
// a String or Number value that a header cannot hold as it is (line breaks,
// spaces at its ends) or that starts with a double quote is a Go-quoted
// string.
const (
	hdrAttr      = "x-sqs-attr-"
	hdrSys       = "x-sqs-sys-"
	hdrMessageID = "x-sqs-message-id"
	hdrSenderID  = "x-sqs-sender-id"
	hdrDedupID   = "x-sqs-dedup-id"
)

// encodeAttr is a's header value.
func encodeAttr(name string, a msgAttr) string {
	v := a.StringValue
	if a.binary() {
		v = base64.StdEncoding.EncodeToString(a.bin)
	} else if v != strings.TrimSpace(v) || strings.ContainsAny(v, "\r\n\x00") || strings.HasPrefix(v, `"`) {
		v = strconv.Quote(v)
	}
	return name + ";" + a.DataType + ";" + v
}

// decodeAttr reads a header value of encodeAttr back.
func decodeAttr(s string) (string, msgAttr, bool) {
	name, rest, ok := strings.Cut(s, ";")
	if !ok {
		return "", msgAttr{}, false
	}
	typ, v, ok := strings.Cut(rest, ";")
	if !ok {
		return "", msgAttr{}, false
	}
	a := msgAttr{DataType: typ}
	if a.binary() {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return "", msgAttr{}, false
		}
		a.bin, a.BinaryValue = b, v
		return name, a, true
	}
	if strings.HasPrefix(v, `"`) {
		uq, err := strconv.Unquote(v)
		if err != nil {
			return "", msgAttr{}, false
		}
		v = uq
	}
	a.StringValue = v
	return name, a, true
}

// stored is what a delivered message carries of SQS.
type stored struct {
	messageID, senderID, dedupID string
	attrs, sys                   map[string]msgAttr
}

// readKept reads a delivered message's SQS headers; messages pushed by LMQ
// clients have none, and get a MessageId derived from their queue and
// sequence.
func readKept(queue string, d *gateway.Delivery) stored {
	var st stored
	for _, h := range d.Message.Kept {
		name := strings.ToLower(h.Name)
		switch {
		case name == hdrMessageID:
			st.messageID = h.Value
		case name == hdrSenderID:
			st.senderID = h.Value
		case name == hdrDedupID:
			st.dedupID = h.Value
		case strings.HasPrefix(name, hdrAttr), strings.HasPrefix(name, hdrSys):
			n, a, ok := decodeAttr(h.Value)
			if !ok {
				continue
			}
			if strings.HasPrefix(name, hdrAttr) {
				if st.attrs == nil {
					st.attrs = make(map[string]msgAttr)
				}
				st.attrs[n] = a
			} else {
				if st.sys == nil {
					st.sys = make(map[string]msgAttr)
				}
				st.sys[n] = a
			}
		}
	}
	if st.messageID == "" {
		st.messageID = uuid.NewSHA1(uuid.NameSpaceURL, []byte(queue+"\x00"+strconv.FormatUint(d.Seq, 10))).String()
	}
	return st
}
