// Package jsapi holds the JetStream wire names that nats.go's jetstream
// package does not expose: the API subject prefix of a JetStream handle and
// the API subjects of the requests the gateway sends itself (the
// dispatcher's no_wait pull, the accumulator's leader-only message read),
// the Key-Value and Object Store layouts the gateway writes or reads by hand
// (flow-controlled object uploads), and the API error codes it tells apart.
// It is the one place that spells JetStream's subjects: a test fails when
// such a literal appears in any other non-test file. It also reads by hand
// the two JetStream answers that are read once per message on the hot
// paths, with no allocation: a delivery's ack subject (ack.go, ParseAck)
// and the PubAck of a stored message (puback.go, ParsePubAck, which falls
// back to nats.go's encoding/json reading for any form it does not know).
package jsapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Prefix is js's API prefix, ending in a dot, as nats.go builds it for its
// own requests (jetstream.New, NewWithDomain, NewWithAPIPrefix): the default
// "$JS.API.", a domain's "$JS.<domain>.API.", or an explicit prefix for an
// imported JetStream.
func Prefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// New returns a JetStream handle on nc for the account's own JetStream, a
// domain's (domain != ""), or one imported under apiPrefix; at most one of
// the two may be given.
func New(nc *nats.Conn, domain, apiPrefix string) (jetstream.JetStream, error) {
	var (
		js  jetstream.JetStream
		err error
	)
	switch {
	case domain != "" && apiPrefix != "":
		return nil, errors.New("jetstream: a domain or an API prefix, not both")
	case domain != "":
		js, err = jetstream.NewWithDomain(nc, domain)
	case apiPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, apiPrefix)
	default:
		js, err = jetstream.New(nc)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// MsgNextSubject is the subject of pull requests to stream's consumer
// (JetStream's CONSUMER.MSG.NEXT), under js's API prefix.
func MsgNextSubject(js jetstream.JetStream, stream, consumer string) string {
	return Prefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + consumer
}

// MsgGetSubject is the subject of STREAM.MSG.GET requests to stream, which
// only the stream's leader answers (unlike direct gets), under the API
// prefix prefix (see Prefix).
func MsgGetSubject(prefix, stream string) string { return prefix + "STREAM.MSG.GET." + stream }

// ErrCodeNoMessage is JetStream's API error code for "no message found"
// (JSNoMessageFoundErr).
const ErrCodeNoMessage = 10037

// JetStream's answers to a delete of a message that is not stored.
const (
	// errCodeSequenceNotFound: the delete removed nothing
	// (JSSequenceNotFoundErrF).
	errCodeSequenceNotFound = 10043
	// errCodeDeleteFailed is the generic "deletion failed" error
	// (JSStreamMsgDeleteFailedF), carrying the store's own error text.
	errCodeDeleteFailed = 10057
)

// MsgGone reports whether err, from a get or a delete of one message by
// sequence, says the message is not (or no longer) stored. A delete of a
// message already gone is answered with the generic deletion failure
// (10057) and the store's "no message found" or "deleted message" as its
// description, or with 10043, not with 10037 as a get is (nats-server
// 2.15); a deleter that took that for a failure would retry, or report an
// error, for a message that another gateway (or an earlier try) has
// removed already. nats.go's Stream.DeleteMsg flattens the API error into
// the text of ErrMsgDeleteUnsuccessful, so for a delete the text is all
// there is to read.
func MsgGone(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == ErrCodeNoMessage || apiErr.ErrorCode == errCodeSequenceNotFound
	}
	if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return false
	}
	text := err.Error()
	if strings.Contains(text, fmt.Sprintf("err_code=%d ", errCodeSequenceNotFound)) {
		return true
	}
	if !strings.Contains(text, fmt.Sprintf("err_code=%d ", errCodeDeleteFailed)) {
		return false
	}
	for _, d := range []string{"description=no message found", "description=deleted message", "description=stream store EOF"} {
		if strings.HasSuffix(text, d) {
			return true
		}
	}
	return false
}

// KVStream is the stream holding the Key-Value bucket's entries.
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubject is the stream subject of key's entries in the Key-Value bucket.
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// ObjectStream is the stream holding the Object Store bucket's objects.
func ObjectStream(bucket string) string { return "OBJ_" + bucket }

// ObjectChunkSubject is the subject of the chunks of one object version
// (nuid) in the Object Store bucket.
func ObjectChunkSubject(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// ObjectMetaSubject is the subject of the description of the object name in
// the Object Store bucket (its latest rolls up the earlier ones).
func ObjectMetaSubject(bucket, name string) string {
	return "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}
