package embedded

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStoreRestartKeepsStreams: the watchdog's cure for write errors,
// JetStream stopped and started in the running server, reopens the streams
// with their messages, and the same client connection stores again.
func TestStoreRestartKeepsStreams(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "s", []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.watch.restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if _, err := js.Publish(ctx, "s", []byte("after")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 4 {
		t.Errorf("after the restart the stream holds %d messages, want 4", n)
	}
	if err := s.StoreError(); err != nil {
		t.Errorf("store error on a healthy server: %v", err)
	}
	if s.StoreRestarts() != 1 {
		t.Errorf("restarts %d, want 1", s.StoreRestarts())
	}
}
