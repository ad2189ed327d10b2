package embedded

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestStartFailsFast: what keeps the server from starting is Start's error,
// naming the flag to change, and the data directory is left unlocked; a
// second Start on the same directory then works (issue 16).
func TestStartFailsFast(t *testing.T) {
	dir := t.TempDir()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"client port", Options{DataDir: dir, Listen: held.Addr().String(), ClientAuth: ClientAuth{None: true}},
			[]string{"--nats-listen " + held.Addr().String(), "address already in use"}},
		{"cluster port", Options{DataDir: dir, ServerName: "n1", ClusterName: "c", ClusterListen: held.Addr().String()},
			[]string{"--cluster-listen " + held.Addr().String(), "address already in use"}},
		{"data dir", Options{DataDir: filepath.Join(file, "sub")},
			[]string{"--data-dir " + filepath.Join(file, "sub"), "cannot be created"}},
	} {
		_, err := startErr(tc.o)
		if err == nil {
			t.Fatalf("%s: started", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to contain %q", tc.name, err, w)
			}
		}
	}
	s, err := startErr(Options{DataDir: dir})
	if err != nil {
		t.Fatalf("after the failed starts: %v", err)
	}
	s.Stop()
}

// TestAwaitReadyFatal: a fatal error the server logs while starting ends
// the wait at once with that error (rather than "not ready in time").
func TestAwaitReadyFatal(t *testing.T) {
	srv, err := server.NewServer(&server.Options{DontListen: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	fatal := make(chan string, 1)
	fatal <- "Error listening on port: 127.0.0.1:4222, bind: address already in use"
	err = awaitReady(context.Background(), srv, 0, fatal) // never started: only the fatal error can end the wait early
	if err == nil || !strings.Contains(err.Error(), "failed to start: Error listening on port") {
		t.Fatalf("awaitReady: %v", err)
	}
}
