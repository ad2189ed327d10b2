package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/server"
)

// TestWritePortsFile: the file holds the addresses as JSON under their
// documented names, a second write replaces the first whole, and no
// temporary file is left beside it.
func TestWritePortsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ports.json")
	if err := writePortsFile(path, server.Addrs{NATS: "127.0.0.1:4000", Cluster: "127.0.0.1:4001"}); err != nil {
		t.Fatal(err)
	}
	want := server.Addrs{HTTP: "127.0.0.1:1", RPC: "127.0.0.1:2", Debug: "127.0.0.1:3", NATS: "127.0.0.1:4000", Complete: true}
	if err := writePortsFile(path, want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	for k, v := range map[string]any{"http": want.HTTP, "rpc": want.RPC, "debug": want.Debug, "nats": want.NATS, "complete": true} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (file %s)", k, m[k], v, b)
		}
	}
	if _, ok := m["cluster"]; ok {
		t.Errorf("the second write kept the first's cluster: %s", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory, want the ports file alone", len(ents))
	}
	if err := writePortsFile(filepath.Join(dir, "missing", "p.json"), want); err == nil {
		t.Error("no error writing into a missing directory")
	}
}
