// Package jsapi holds the few JetStream wire names that nats.go's jetstream
// package does not expose: the API subject prefix of a JetStream handle (for
// the requests the gateway sends itself: the dispatcher's no_wait pull and
// the accumulator's leader-only message read). It is the one place that
// spells JetStream's subjects.
package jsapi

import (
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
