package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/sqs"
)

// sqsFlags are the settings of the SQS API (package sqs).
type sqsFlags struct {
	listen          string
	account, region string
	tlsCert, tlsKey string
	maxConns        int
	maxRequest      int64
}

func addSQSFlags(fs *flag.FlagSet, f *sqsFlags) {
	fs.StringVar(&f.listen, "sqs-listen", "", "serve Amazon SQS's API (AWS JSON 1.0 and query protocols, for the AWS SDKs and CLI) on this address, e.g. 127.0.0.1:9324, on the same queues (empty: off). Without SigV4 authentication any credentials are accepted")
	fs.StringVar(&f.account, "sqs-account", sqs.DefaultAccount, "the 12-digit account id in the SQS API's queue URLs (http://HOST:PORT/ACCOUNT/NAME) and ARNs")
	fs.StringVar(&f.region, "sqs-region", sqs.DefaultRegion, "the region in the SQS API's queue ARNs (requests signed for any region are served)")
	fs.StringVar(&f.tlsCert, "sqs-tls-cert", "", "serve the SQS API over HTTPS with this PEM certificate (chain) `FILE`; needs --sqs-tls-key (may be the files of --tls-cert)")
	fs.StringVar(&f.tlsKey, "sqs-tls-key", "", "PEM private key `FILE` of --sqs-tls-cert")
	fs.IntVar(&f.maxConns, "max-sqs-conns", 4096, "SQS API connections open at once (long polls and idle keep-alive ones count); beyond it new connections wait in the kernel's queue (0: no limit)")
	fs.Int64Var(&f.maxRequest, "sqs-max-request-bytes", sqs.DefaultMaxRequestBytes, "largest SQS API request body in bytes (a message of up to 1 MiB and its attributes, escaped); larger ones are answered 413")
}

func (f *sqsFlags) check() error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--sqs-tls-cert and --sqs-tls-key go together")
	}
	if len(f.account) != 12 || !digits(f.account) {
		return fmt.Errorf("--sqs-account %q: want 12 digits", f.account)
	}
	if f.region == "" {
		return errors.New("--sqs-region must not be empty")
	}
	if f.maxConns < 0 {
		return errors.New("--max-sqs-conns must not be negative")
	}
	if f.maxRequest < 1<<20 {
		return errors.New("--sqs-max-request-bytes must be at least 1048576 (SQS's largest message)")
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// tlsConfig loads the SQS port's certificate, if any.
func (f *sqsFlags) tlsConfig() (*tls.Config, error) {
	if f.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--sqs-tls-cert %s / --sqs-tls-key %s: %w", f.tlsCert, f.tlsKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
