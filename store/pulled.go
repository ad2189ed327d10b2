package store

import "strings"

// A pulled message's delivery facts are in its ack subject (Msg.Reply),
// which JetStream writes as
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//
// (older servers: 9 tokens) or, with the domain and account hash,
//
//	$JS.ACK.<domain>.<acc hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>…]
//
// (11 tokens or more; the ones after <pending> are not read). PullMeta
// reads it as nats.go's Msg.Metadata does, without its allocation: once per
// pulled message, on the dispatcher's hot path.

// PullMeta is what a pulled message's ack subject says about the delivery.
type PullMeta struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Delivered is JetStream's delivery count of the message (1: first).
	Delivered uint64
	// Stored is when JetStream stored the message (Unix ns).
	Stored int64
}

const ackPrefix = "$JS.ACK."

// PullMeta reads the delivery facts of a pulled message from its ack
// subject; false when Reply is not one (the message did not come from a
// consumer).
func (m *Msg) PullMeta() (PullMeta, bool) { return parseAckSubject(m.Reply) }

func parseAckSubject(reply string) (PullMeta, bool) {
	if !strings.HasPrefix(reply, ackPrefix) {
		return PullMeta{}, false
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
		return PullMeta{}, false
	}
	// <stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>
	var tok [6]string
	for i := range tok {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	return PullMeta{
		Delivered: parseAckNum(tok[2]),
		Seq:       parseAckNum(tok[3]),
		Stored:    int64(parseAckNum(tok[5])),
	}, true
}

// parseAckNum reads a decimal token of an ack subject; 0 when it is not one
// (as nats.go reads it).
func parseAckNum(s string) uint64 {
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
