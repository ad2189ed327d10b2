package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/flaghelp"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

const tokenUsage = `Usage: lmq-gateway token create --name NAME [--prefix P | --regexp RE] --rights push,pull,admin [flags]
       lmq-gateway token list [--json] [flags]
       lmq-gateway token revoke [flags] ID...

Manages the access tokens of a running gateway started with --tokens, through
its /tokens endpoint (which needs the operator's --auth-token/--auth-basic, or
a token with the admin right on every queue). Tokens are shared by every
gateway on the same NATS: a revocation reaches all of them within a second.

create prints the new token, "<id>.<secret>", on a line of its own: it is
shown only this once (the gateway keeps only a hash of the secret).

Flags:
`

// token is the "token" subcommand: create, list or revoke tokens.
func token(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("token: want create, list or revoke")
	}
	verb := args[0]
	switch {
	case verb == "-h" || verb == "-help" || verb == "--help":
		// The flags of every verb (create's are a superset); Parse answers
		// flag.ErrHelp.
		verb = "create"
	case strings.HasPrefix(verb, "-"):
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("token: want create, list or revoke before the flags")
	default:
		args = args[1:]
	}
	fs := flag.NewFlagSet("lmq-gateway token "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	gw := addGatewayFlags(fs,
		"the operator's --auth-token, or an admin token on every queue (default from LMQ_AUTH_TOKEN)",
		"USER:PASSWORD of the operator's --auth-basic (default from LMQ_AUTH_BASIC)",
		"print the gateway's JSON answer")
	var name, prefix, re, rights *string
	if verb == "create" {
		name = fs.String("name", "", "the token's namespace (1 to 64 of A-Z a-z 0-9 _ . -): it labels the metrics; tokens may share one")
		prefix = fs.String("prefix", "", "scope: the queues whose names start with this (empty and no --regexp: every queue)")
		re = fs.String("regexp", "", "scope: the queues whose whole name this RE2 expression matches (instead of --prefix)")
		rights = fs.String("rights", "", "comma-separated rights: push, pull (with ack, nack, ext), admin")
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, tokenUsage)
		flaghelp.PrintDefaults(fs, stderr)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := tokenClient{base: ops.BaseURL(*gw.addr), cred: gw.credential(), insecure: *gw.insecure}
	ctx, cancel := context.WithTimeout(ctx, *gw.timeout)
	defer cancel()
	// answer asks /tokens; with --json it prints the gateway's answer as it
	// is and says so (printed), leaving the caller nothing more to print.
	answer := func(method string, body []byte, want int, out any) (printed bool, err error) {
		raw, err := c.do(ctx, method, auth.PathTokens, body, want, out)
		if err != nil || !*gw.asJSON {
			return false, err
		}
		_, err = stdout.Write(append(raw, '\n'))
		return true, err
	}
	switch verb {
	case "create":
		if fs.NArg() > 0 {
			return fmt.Errorf("token create: unexpected argument %q", fs.Arg(0))
		}
		spec := auth.TokenSpec{Name: *name, Prefix: *prefix, Regexp: *re}
		for r := range strings.SplitSeq(*rights, ",") {
			if r = strings.TrimSpace(r); r != "" {
				spec.Rights = append(spec.Rights, r)
			}
		}
		body, _ := json.Marshal(spec)
		var out auth.CreatedToken
		if printed, err := answer(http.MethodPost, body, http.StatusCreated, &out); printed || err != nil {
			return err
		}
		fmt.Fprintf(stderr, "token %s (namespace %s, rights %s, scope %s); keep it, it is not shown again:\n",
			out.ID, out.Name, strings.Join(out.Rights, ","), scopeText(out.TokenInfo))
		_, err := fmt.Fprintln(stdout, out.Token)
		return err
	case "list":
		if fs.NArg() > 0 {
			return fmt.Errorf("token list: unexpected argument %q", fs.Arg(0))
		}
		var out auth.TokenList
		if printed, err := answer(http.MethodGet, nil, http.StatusOK, &out); printed || err != nil {
			return err
		}
		if len(out.Tokens) == 0 {
			_, err := fmt.Fprintln(stdout, "No tokens.")
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tRIGHTS\tSCOPE\tCREATED")
		for _, t := range out.Tokens {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Rights, ","), scopeText(t), t.Created.Format(time.RFC3339))
		}
		return tw.Flush()
	case "revoke":
		if fs.NArg() == 0 {
			return fmt.Errorf("token revoke: which token? (an ID from \"lmq-gateway token list\")")
		}
		for _, id := range fs.Args() {
			if _, err := c.do(ctx, http.MethodDelete, auth.PathTokens+"/"+id, nil, http.StatusNoContent, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked %s\n", id)
		}
		return nil
	}
	return fmt.Errorf("token: unknown command %q (want create, list or revoke)", verb)
}

func scopeText(t auth.TokenInfo) string {
	switch {
	case t.Regexp != "":
		return "regexp " + t.Regexp
	case t.Prefix != "":
		return "prefix " + t.Prefix
	}
	return "every queue"
}

// tokenClient talks to a gateway's /tokens.
type tokenClient struct {
	base     string
	cred     auth.Credential
	insecure bool
}

// do sends a request and decodes an answer of status want into out (when
// not nil); it returns the answer's body.
func (c tokenClient) do(ctx context.Context, method, path string, body []byte, want int, out any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.cred.Set(req)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for by --insecure
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("token: reading the answer: %w", err)
	}
	if resp.StatusCode != want {
		hint := ""
		if resp.StatusCode == http.StatusNotFound && path == auth.PathTokens {
			hint = " (is the gateway running with --tokens?)"
		}
		return nil, fmt.Errorf("token: %s %s answered %s: %s%s", method, req.URL.Path, resp.Status, strings.TrimSpace(string(raw)), hint)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("token: parsing the answer: %w", err)
		}
	}
	return raw, nil
}
