package migrate

import (
	"context"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// TestMainRejectsReplicas: --replicas outside JetStream's 1 to 5 is an
// error naming the flag, not a quiet default (issue 16).
func TestMainRejectsReplicas(t *testing.T) {
	for _, r := range []string{"0", "-3", "6"} {
		err := Main(t.Context(), []string{"--from", "http://127.0.0.1:1", "--replicas", r}, io.Discard)
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
		err := Main(ctx, []string{"--from", tc.from, "--dry-run"}, io.Discard)
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
	o := RegisterFlags(fs)
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
	err = Main(t.Context(), []string{"--from", "http://127.0.0.1:1", "--to-nats-creds", "x.creds", "--to-nats-token", "t"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--to-nats: natsconn: give only one of") {
		t.Errorf("creds and token together: %v", err)
	}
}
