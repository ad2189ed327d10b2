package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// addNATSFlags defines the settings of the connection to an external NATS
// deployment (--nats-url) on fs: credentials and TLS (natsconn.AddFlags),
// and the JetStream domain. Like every flag they may come from the
// environment (LMQ_NATS_PASSWORD, LMQ_NATS_TOKEN), which keeps secrets off
// the command line.
func addNATSFlags(fs *flag.FlagSet, o *natsconn.Options) {
	natsconn.AddFlags(fs, o, "nats-", "nats-url")
	fs.StringVar(&o.Domain, "nats-domain", "", "JetStream `DOMAIN` to keep the queues in, for --nats-url servers whose JetStream runs elsewhere (e.g. a leaf node of a hub with JetStream domain DOMAIN); empty: the account's own JetStream")
}

// checkNATSFlags rejects connection settings that would be ignored: they
// apply to --nats-url only, the embedded server is reached in-process.
func checkNATSFlags(natsURL string, o natsconn.Options) error {
	if natsURL == "" && o != (natsconn.Options{}) {
		return errors.New("--nats-creds, --nats-user, --nats-password, --nats-token, --nats-tls-* and --nats-domain need --nats-url")
	}
	return nil
}

// natsListenAuth is how NATS clients of the embedded server's client port
// (--nats-listen) authenticate.
type natsListenAuth struct {
	mode     string // "password" or "none"
	user     string
	password string
}

// addNATSListenFlags defines the authentication of the embedded server's
// client port on fs. The port is never open by surprise: without a given
// password the server generates one on its first start.
func addNATSListenFlags(fs *flag.FlagSet, a *natsListenAuth) {
	fs.StringVar(&a.mode, "nats-listen-auth", "password",
		"authentication `MODE` of --nats-listen clients: password (--nats-listen-user with --nats-listen-password, or a password generated on the first start "+
			"and kept, with the full client URL, in DATA-DIR/"+embedded.ClientURLFile+", mode 0600; connect with "+
			"nats --server \"$(cat DATA-DIR/"+embedded.ClientURLFile+")\") or none (an open port: anyone who reaches it reads and changes every queue)")
	fs.StringVar(&a.user, "nats-listen-user", embedded.DefaultUser, "`USER` that NATS clients of --nats-listen authenticate as")
	fs.StringVar(&a.password, "nats-listen-password", "",
		"`PASSWORD` of --nats-listen-user (better set by LMQ_NATS_LISTEN_PASSWORD; give every node of a cluster the same one so that NATS clients can fail over); empty: generated, see --nats-listen-auth")
}

// checkNATSListenFlags rejects authentication settings that contradict
// each other or would be ignored.
func checkNATSListenFlags(natsURL, natsListen string, a natsListenAuth) error {
	custom := a.password != "" || a.user != embedded.DefaultUser
	switch a.mode {
	case "password":
		if a.user == "" {
			return errors.New("--nats-listen-user must not be empty")
		}
	case "none":
		if custom {
			return errors.New("--nats-listen-auth none takes no --nats-listen-user or --nats-listen-password")
		}
	default:
		return fmt.Errorf("--nats-listen-auth %q: want password or none", a.mode)
	}
	if natsURL != "" && (custom || a.mode != "password") {
		return errors.New("--nats-listen-auth, --nats-listen-user and --nats-listen-password are for the embedded server; they do not go with --nats-url")
	}
	if natsListen == "" && custom {
		return errors.New("--nats-listen-user and --nats-listen-password need --nats-listen (the embedded server has no client port without it)")
	}
	return nil
}

// clientAuth is a's setting of the embedded server.
func (a natsListenAuth) clientAuth() embedded.ClientAuth {
	return embedded.ClientAuth{None: a.mode == "none", User: a.user, Password: a.password}
}
