package main

import (
	"io"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/embedded"
)

// TestNATSListenAuthFlags: the client port's authentication settings, from
// flags and the environment, and the combinations refused.
func TestNATSListenAuthFlags(t *testing.T) {
	c, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.natsAuth.clientAuth(); got != (embedded.ClientAuth{User: embedded.DefaultUser}) {
		t.Errorf("default %+v: want user %s with a generated password", got, embedded.DefaultUser)
	}
	c, err = parseConfig([]string{"--nats-listen-user", "alice"}, env(map[string]string{"LMQ_NATS_LISTEN_PASSWORD": "pw"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.natsAuth.clientAuth(); got != (embedded.ClientAuth{User: "alice", Password: "pw"}) {
		t.Errorf("explicit: %+v", got)
	}
	c, err = parseConfig([]string{"--nats-listen-auth", "none"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.natsAuth.clientAuth().None {
		t.Error("--nats-listen-auth none does not open the port")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-listen-auth", "token"}, "want password or none"},
		{[]string{"--nats-listen-auth", "none", "--nats-listen-password", "x"}, "takes no"},
		{[]string{"--nats-listen-user", ""}, "must not be empty"},
		{[]string{"--nats-url", "nats://n:4222", "--nats-listen-password", "x"}, "do not go with --nats-url"},
		{[]string{"--nats-url", "nats://n:4222", "--nats-listen-auth", "none"}, "do not go with --nats-url"},
		{[]string{"--nats-listen", "", "--nats-listen-password", "x"}, "need --nats-listen"},
	} {
		_, err := parseConfig(tc.args, env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	// Neither the in-process-only nor the external setup trips over defaults.
	for _, args := range [][]string{{"--nats-listen", ""}, {"--nats-url", "nats://n:4222"}, {"--nats-listen", "", "--nats-listen-auth", "none"}} {
		if _, err := parseConfig(args, env(nil), io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}
