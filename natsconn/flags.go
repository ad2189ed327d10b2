package natsconn

import "flag"

// AddFlags defines the credentials and TLS settings of o on fs, named
// prefix+"creds", prefix+"user", … (the gateway uses "nats-" for its
// --nats-url, migrate "to-nats-" for its --to-nats), so that every command
// reaching a secured NATS spells them the same way. urlFlag names the flag
// they apply to, for the help texts.
func AddFlags(fs *flag.FlagSet, o *Options, prefix, urlFlag string) {
	fs.StringVar(&o.CredsFile, prefix+"creds", "", "NATS credentials `FILE` (JWT and seed, .creds) for --"+urlFlag)
	fs.StringVar(&o.User, prefix+"user", "", "NATS `USER` for --"+urlFlag+" (with --"+prefix+"password)")
	fs.StringVar(&o.Password, prefix+"password", "", "NATS `PASSWORD` of --"+prefix+"user (better from the environment than on the command line)")
	fs.StringVar(&o.Token, prefix+"token", "", "NATS authentication `TOKEN` for --"+urlFlag+" (better from the environment than on the command line)")
	fs.StringVar(&o.CAFile, prefix+"tls-ca", "", "PEM `FILE` of the CA that signed the NATS servers' certificates (implies TLS)")
	fs.StringVar(&o.CertFile, prefix+"tls-cert", "", "PEM client certificate `FILE` for NATS servers that verify clients; needs --"+prefix+"tls-key")
	fs.StringVar(&o.KeyFile, prefix+"tls-key", "", "PEM private key `FILE` of --"+prefix+"tls-cert")
}
