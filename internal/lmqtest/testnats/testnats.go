// Package testnats starts the embedded nats-server for the tests of the
// packages above it: a real server (JetStream, file storage in a temporary
// directory) on no port, reached in-process, and stopped when the test ends.
package testnats

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
)

// Start starts a server with its data in a temporary directory of t.
func Start(t testing.TB) *embedded.Server {
	t.Helper()
	return StartWith(t, embedded.Options{})
}

// StartWith starts the server of opts (its data in a temporary directory of
// t when opts.DataDir is ""), stopped when t ends. A test may stop it
// earlier (Stop); the cleanup's Stop then does nothing.
func StartWith(t testing.TB, opts embedded.Options) *embedded.Server {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	s := embedded.New(opts)
	// The test's context bounds the start only (lifecycle.Service).
	if err := s.Start(Context(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Connect opens a client connection named name to s, closed when t ends.
func Connect(t testing.TB, s *embedded.Server, name string) *nats.Conn {
	t.Helper()
	nc, err := s.Connect(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream handle on nc.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Client starts a server for t and returns a connection named name to it
// and a JetStream handle on that connection.
func Client(t testing.TB, name string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := Connect(t, Start(t), name)
	return nc, JetStream(t, nc)
}

// Context bounds a test's requests to the server; the bound is reached only
// on failure (a request hangs), and is generous for a loaded machine.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
