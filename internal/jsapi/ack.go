package jsapi

import "strings"

// A pulled message's delivery facts are in its ack subject (its reply
// subject), which JetStream writes as
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//
// (older servers: 9 tokens) or, with the domain and account hash,
//
//	$JS.ACK.<domain>.<acc hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>…]
//
// (11 tokens or more; those after <pending> are not read). ParseAck reads
// it as nats.go's Msg.Metadata does, without its allocation: once per
// pulled message, on the dispatcher's hot path.

const ackPrefix = "$JS.ACK."

// AckFacts are what an ack subject says about a delivery.
type AckFacts struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Delivered is JetStream's delivery count of the message (1: first).
	Delivered uint64
	// Stored is when JetStream stored the message (Unix ns).
	Stored int64
}

// ParseAck reads the ack subject reply; false when it is not one. A token
// that is not a decimal number reads as 0, as nats.go reads it.
func ParseAck(reply string) (AckFacts, bool) {
	if !strings.HasPrefix(reply, ackPrefix) {
		return AckFacts{}, false
	}
	n := strings.Count(reply, ".") + 1
	rest := reply[len(ackPrefix):]
	switch {
	case n == 9:
	case n >= 11:
		// Skip the domain and the account hash.
		for range 2 {
			_, rest, _ = strings.Cut(rest, ".")
		}
	default:
		return AckFacts{}, false
	}
	// <stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>
	var tok [6]string
	for i := range tok {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	return AckFacts{
		Delivered: ackNum(tok[2]),
		Seq:       ackNum(tok[3]),
		Stored:    int64(ackNum(tok[5])),
	}, true
}

// ackNum reads a decimal token of an ack subject; 0 when it is not one.
func ackNum(s string) uint64 {
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
