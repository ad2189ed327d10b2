package main

import (
	"errors"
	"flag"

	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// addNATSFlags defines the settings of the connection to an external NATS
// deployment (--nats-url) on fs: credentials and TLS. Like every flag they
// may come from the environment (LMQ_NATS_PASSWORD, LMQ_NATS_TOKEN), which
// keeps secrets off the command line.
func addNATSFlags(fs *flag.FlagSet, o *natsconn.Options) {
	fs.StringVar(&o.CredsFile, "nats-creds", "", "NATS credentials `FILE` (JWT and seed, .creds) for --nats-url")
	fs.StringVar(&o.User, "nats-user", "", "NATS user for --nats-url (with --nats-password)")
	fs.StringVar(&o.Password, "nats-password", "", "NATS password of --nats-user (better set by LMQ_NATS_PASSWORD)")
	fs.StringVar(&o.Token, "nats-token", "", "NATS authentication token for --nats-url (better set by LMQ_NATS_TOKEN)")
	fs.StringVar(&o.CAFile, "nats-tls-ca", "", "PEM `FILE` of the CA that signed the NATS servers' certificates (implies TLS)")
	fs.StringVar(&o.CertFile, "nats-tls-cert", "", "PEM client certificate `FILE` for NATS servers that verify clients; needs --nats-tls-key")
	fs.StringVar(&o.KeyFile, "nats-tls-key", "", "PEM private key `FILE` of --nats-tls-cert")
}

// checkNATSFlags rejects connection settings that would be ignored: they
// apply to --nats-url only, the embedded server is reached in-process.
func checkNATSFlags(natsURL string, o natsconn.Options) error {
	if natsURL == "" && o != (natsconn.Options{}) {
		return errors.New("--nats-creds, --nats-user, --nats-password, --nats-token and --nats-tls-* need --nats-url")
	}
	return nil
}
