package route

import "strings"

// Right is a set of rights: what a route needs (Need), what an SQS action
// needs (package sqs) and what an access token holds (package auth). It is
// declared here, with the routes, so that the route table depends on nothing
// of the token store.
type Right uint8

// The rights. Pull covers the replies to a delivery (ack, nack, ext). Admin
// covers properties, deleting a queue and its dead letters on the queues of
// a token's scope; with a scope of every queue, also the tokens, the
// default-properties list, /metrics and the console.
const (
	RightPush Right = 1 << iota
	RightPull
	RightAdmin
)

// AnyRight is a Need's Right when any one of the rights will do (reading
// about a queue).
const AnyRight = RightPush | RightPull | RightAdmin

var rightNames = []struct {
	r    Right
	name string
}{{RightPush, "push"}, {RightPull, "pull"}, {RightAdmin, "admin"}}

// String names the rights, comma-separated.
func (r Right) String() string { return strings.Join(r.Names(), ",") }

// Names lists the rights' names, in a fixed order.
func (r Right) Names() []string {
	out := []string{}
	for _, n := range rightNames {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// RightNamed is the right called name ("push", "pull", "admin"); false
// for any other name.
func RightNamed(name string) (Right, bool) {
	for _, n := range rightNames {
		if n.name == name {
			return n.r, true
		}
	}
	return 0, false
}
