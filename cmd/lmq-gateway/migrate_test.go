package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// TestMainRejectsReplicas: --replicas outside JetStream's 1 to 5 is an
// error naming the flag, not a quiet default (issue 16).
func TestMainRejectsReplicas(t *testing.T) {
	for _, r := range []string{"0", "-3", "6"} {
		err := migrateMain(t.Context(), []string{"--from", "http://127.0.0.1:1", "--replicas", r}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--replicas "+r+": want 1 to 5") {
			t.Errorf("--replicas %s: %v", r, err)
		}
	}
}

// TestSourceTypoFailsFast: a --from whose name does not resolve, or whose
// port refuses the very first request, ends the run with an error naming
// --from instead of retrying for --retry-for (a minute by default).
func TestSourceTypoFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct{ from, want string }{
		{"http://old-lmq.invalid:9980", "no such host"},
		{refused, "connection refused"},
	} {
		// The context is the test's safety net only (beyond --retry-for,
		// a minute): the error must be the source's, not the deadline's.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		err := migrateMain(ctx, []string{"--from", tc.from, "--dry-run"}, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "--from "+tc.from) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--from %s: %v, want an error naming --from and %q", tc.from, err, tc.want)
		}
	}
}

// TestToNATSFlags: migrate has the gateway's NATS connection settings, as
// --to-nats-*, and checks them as the gateway does.
func TestToNATSFlags(t *testing.T) {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	o := migrateFlags(fs)
	err := fs.Parse([]string{
		"--to-nats-user", "mig", "--to-nats-password", "pw",
		"--to-nats-tls-ca", "ca.pem", "--to-nats-tls-cert", "c.pem", "--to-nats-tls-key", "k.pem",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := natsconn.Options{User: "mig", Password: "pw", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}
	if o.ToNATSAuth != want {
		t.Errorf("parsed %+v, want %+v", o.ToNATSAuth, want)
	}
	// Checked before the source is asked (which here would refuse).
	err = migrateMain(t.Context(), []string{"--from", "http://127.0.0.1:1", "--to-nats-creds", "x.creds", "--to-nats-token", "t"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--to-nats: natsconn: give only one of") {
		t.Errorf("creds and token together: %v", err)
	}
}

func TestNamesCommand(t *testing.T) {
	var b strings.Builder
	if err := namesMain([]string{"lmq/foo", "bar"}, &b); err != nil {
		t.Fatal(err)
	}
	enc := mapping.EncodeName("lmq/foo")
	for _, want := range []string{"stream:         LMQS_34\n", "subject:        lmq.q.34." + enc + "\n", "consumer:       " + enc + "\n", "notify-subject: lmq.n." + enc + "\n",
		`nats --server "$(cat DATA-DIR/nats-client.url)"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := namesMain([]string{"--json", "a b"}, &b); err != nil {
		t.Fatal(err)
	}
	var n mapping.Native
	if err := json.Unmarshal([]byte(b.String()), &n); err != nil || n.Queue != "a b" || n.Stream != mapping.StreamName("a b") {
		t.Errorf("json: %s (%v)", b.String(), err)
	}
	if err := namesMain(nil, io.Discard); err == nil {
		t.Error("no queue accepted")
	}
}

func TestMigrateFlags(t *testing.T) {
	ctx := context.Background()
	if err := migrateMain(ctx, []string{"--to-nats", "nats://127.0.0.1:1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--from") {
		t.Errorf("without --from: %v", err)
	}
	if err := migrateMain(ctx, []string{"--from", "http://x", "--queues", "("}, io.Discard); err == nil {
		t.Error("an invalid --queues regexp was accepted")
	}
	if err := migrateMain(ctx, []string{"--from", "ftp://x"}, io.Discard); err == nil {
		t.Error("a non-HTTP source was accepted")
	}
}
