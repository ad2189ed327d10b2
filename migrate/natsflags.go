package migrate

import (
	"flag"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// registerNATSFlags defines the credentials and TLS settings of --to-nats
// on fs: the gateway's --nats-* connection flags, prefixed with "to-", so
// that migrate reaches a secured NATS the way the gateway does.
func registerNATSFlags(fs *flag.FlagSet, o *natsconn.Options) {
	fs.StringVar(&o.CredsFile, "to-nats-creds", "", "NATS credentials `FILE` (JWT and seed, .creds) for --to-nats, as the gateway's --nats-creds")
	fs.StringVar(&o.User, "to-nats-user", "", "NATS `USER` for --to-nats (with --to-nats-password), as the gateway's --nats-user")
	fs.StringVar(&o.Password, "to-nats-password", "", "`PASSWORD` of --to-nats-user")
	fs.StringVar(&o.Token, "to-nats-token", "", "NATS authentication `TOKEN` for --to-nats, as the gateway's --nats-token")
	fs.StringVar(&o.CAFile, "to-nats-tls-ca", "", "PEM `FILE` of the CA that signed the NATS servers' certificates (implies TLS), as the gateway's --nats-tls-ca")
	fs.StringVar(&o.CertFile, "to-nats-tls-cert", "", "PEM client certificate `FILE` for NATS servers that verify clients; needs --to-nats-tls-key")
	fs.StringVar(&o.KeyFile, "to-nats-tls-key", "", "PEM private key `FILE` of --to-nats-tls-cert")
}

// checkFlags rejects settings that the library would quietly default
// (Options.Replicas 0 means 1 there; on the command line it is a mistake).
func checkFlags(o *Options) error {
	if o.Replicas < 1 || o.Replicas > 5 {
		return fmt.Errorf("--replicas %d: want 1 to 5 (JetStream's limit; as the gateway's --replicas)", o.Replicas)
	}
	return nil
}
