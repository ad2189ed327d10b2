package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/flaghelp"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// status prints what LMQ's "lmq-admin status" printed (the NATS servers, then
// per queue its messages, bytes and properties) by asking a running gateway
// for its /stats.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	defHTTP := "localhost:9980"
	if v, ok := os.LookupEnv(envName("http-listen")); ok && v != "" {
		defHTTP = v
	}
	fs := flag.NewFlagSet("lmq-gateway status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", defHTTP, "the gateway's HTTP address: host:port or a URL (https://host:port); default from LMQ_HTTP_LISTEN")
	token := fs.String("auth-token", os.Getenv(envName("auth-token")), "bearer token, when the gateway requires one (default from LMQ_AUTH_TOKEN)")
	basic := fs.String("auth-basic", os.Getenv(envName("auth-basic")), "USER:PASSWORD for basic authentication (default from LMQ_AUTH_BASIC)")
	insecure := fs.Bool("insecure", false, "do not verify the gateway's TLS certificate")
	asJSON := fs.Bool("json", false, "print the /stats document instead of the table")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: lmq-gateway status [flags]\n\nPrints the nodes, then per queue its messages, bytes and properties, of a running gateway.\n\nFlags:\n")
		flaghelp.PrintDefaults(fs, stderr)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	client := ops.StatusClient{Base: *addr, Auth: auth.Credential{BearerToken: *token}, Insecure: *insecure}
	if *basic != "" {
		client.Auth.BasicUser, client.Auth.BasicPassword, _ = strings.Cut(*basic, ":")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	doc, err := client.Fetch(ctx, !*asJSON)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	return ops.PrintStatus(stdout, doc)
}
