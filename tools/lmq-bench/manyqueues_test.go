package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestQueuesWorkload runs the queues workload with small counts against a
// gateway binary built from this module, and a three-node cluster of it. It
// checks that every phase produced its row and that every message came back
// after the restart; it asserts nothing about speed: each phase's time
// budget (--mq-budget) is far beyond what it takes even on a loaded
// machine, so that a phase cut by it means a wedged workload, not a slow
// one.
func TestQueuesWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the gateway binary four times")
	}
	var out, logs bytes.Buffer
	args := []string{"--workloads", "queues", "--mq-queues", "40", "--mq-active", "10", "--mq-samples", "3",
		"--mq-repeat", "1", "--mq-cluster-queues", "6", "--duration", "300ms", "--mq-budget", "5m"}
	if err := run(context.Background(), args, &out, &logs); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), logs.String())
	}
	report := out.String()
	for _, want := range []string{
		"| creation: first push of 256 B to new queues, 16 clients |",
		"| gateway RSS with 40 queues of one message |",
		"| GET /stats |", "| GET /queues |", "| lmq-gateway status |",
		"| restart until /readyz answers 200 |",
		"| after restart, GET /queues lists | 40 of 40 messages |",
		"| after restart, pulled back | 40 of 40 messages |",
		"| gateway CPU, pull-any waiting over 40 empty queues |",
		"| pull-any: push to a random queue until the waiting pull-any returns it (p50 / p99) |",
		"| then a waiting pull on each of 10 queues: RSS |", "| a delivery in flight on each of 10 queues (first pull of each): RSS |",
		"| push across 10 queues, C=16, 256 B |",
		"| pull+ack across 10 queues, C=16, 256 B |",
		"| cluster: Raft groups before → after the queues |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "no sample") || strings.Contains(report, "INCOMPLETE") || strings.Contains(report, "failed") {
		t.Errorf("a phase failed:\n%s", report)
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}

func TestQueuesWorkloadAlone(t *testing.T) {
	if _, err := parseFlags([]string{"--workloads", "queues,push"}, io.Discard); err == nil || !strings.Contains(err.Error(), "alone") {
		t.Errorf("queues with push: %v, want an error saying it runs alone", err)
	}
	cfg, err := parseFlags([]string{"--workloads", "queues"}, io.Discard)
	if err != nil || !cfg.has(wQueues) || cfg.mqQueues != 10_000 || cfg.mqClusterQueues != 2000 {
		t.Errorf("queues defaults: %+v, %v", cfg, err)
	}
}
