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
	fs := flag.NewFlagSet("lmq-gateway status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gw := addGatewayFlags(fs,
		"bearer token, when the gateway requires one (default from LMQ_AUTH_TOKEN)",
		"USER:PASSWORD for basic authentication (default from LMQ_AUTH_BASIC)",
		"print the /stats document instead of the table")
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
	client := ops.StatusClient{Base: *gw.addr, Auth: gw.credential(), Insecure: *gw.insecure}
	ctx, cancel := context.WithTimeout(ctx, *gw.timeout)
	defer cancel()
	doc, err := client.Fetch(ctx, !*gw.asJSON)
	if err != nil {
		return err
	}
	if *gw.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	return ops.PrintStatus(stdout, doc)
}

// gatewayFlags are the flags of the subcommands that talk to a running
// gateway (status, token): where it is, how to authenticate, whether to
// print its JSON answer as it is, and how long to wait.
type gatewayFlags struct {
	addr, bearer, basic *string
	insecure, asJSON    *bool
	timeout             *time.Duration
}

// addGatewayFlags defines them on fs, with the help texts of the
// subcommand's --auth-token, --auth-basic and --json.
func addGatewayFlags(fs *flag.FlagSet, tokenHelp, basicHelp, jsonHelp string) gatewayFlags {
	defHTTP := "localhost:9980"
	if v, ok := os.LookupEnv(envName("http-listen")); ok && v != "" {
		defHTTP = v
	}
	return gatewayFlags{
		addr:     fs.String("http", defHTTP, "the gateway's HTTP address: host:port or a URL (https://host:port); default from LMQ_HTTP_LISTEN"),
		bearer:   fs.String("auth-token", os.Getenv(envName("auth-token")), tokenHelp),
		basic:    fs.String("auth-basic", os.Getenv(envName("auth-basic")), basicHelp),
		insecure: fs.Bool("insecure", false, "do not verify the gateway's TLS certificate"),
		asJSON:   fs.Bool("json", false, jsonHelp),
		timeout:  fs.Duration("timeout", 10*time.Second, "give up after this long"),
	}
}

// credential is what --auth-token and --auth-basic ask to send.
func (g gatewayFlags) credential() auth.Credential {
	c := auth.Credential{BearerToken: *g.bearer}
	if *g.basic != "" {
		c.BasicUser, c.BasicPassword, _ = strings.Cut(*g.basic, ":")
	}
	return c
}
