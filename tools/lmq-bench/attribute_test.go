package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A cut of real `go tool pprof -traces` output: a label line, units of
// ms and s, and stacks of each owner.
const sampleTraces = `File: lmq-gateway
Type: cpu
Duration: 4s, Total samples = 1.87s (46.75%)
-----------+-------------------------------------------------------
     560ms   internal/runtime/syscall/linux.Syscall6
             syscall.RawSyscall6
             net.(*conn).Write
             github.com/lmq-gateway/lmq-gateway/rpc.(*outbox).sendAs
             github.com/lmq-gateway/lmq-gateway/rpc.(*conn).worker
-----------+-------------------------------------------------------
    stream:  LMQS_18
   account:  $G
      1.2s   runtime.mapdelete_fast64
             github.com/nats-io/nats-server/v2/server.(*client).flushClients
             github.com/nats-io/nats-server/v2/server.(*stream).internalLoop
-----------+-------------------------------------------------------
      10ms   runtime.mallocgc
             github.com/nats-io/nats%2ego.NewMsg
             github.com/lmq-gateway/lmq-gateway/store.(*Store).Encode
             github.com/lmq-gateway/lmq-gateway/gateway.(*Gateway).push
-----------+-------------------------------------------------------
     100ms   runtime.scanObject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
`

func TestAttribute(t *testing.T) {
	a, err := attribute(sampleTraces)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]time.Duration{
		ownRPC:       {kindKernel: 560 * time.Millisecond},
		ownJetStream: {kindCode: 1200 * time.Millisecond},
		ownClient:    {kindAlloc: 10 * time.Millisecond},
		ownGC:        {kindGC: 100 * time.Millisecond},
	}
	for o, row := range want {
		for k, v := range row {
			if got := a.cpu[o][k]; got != v {
				t.Errorf("%s / %s: %v, want %v", o, k, got, v)
			}
		}
	}
	if a.total != 1870*time.Millisecond {
		t.Errorf("total %v, want 1.87s", a.total)
	}

	a.cell, a.msgs = "push rpc", 1000
	var sb strings.Builder
	as := &attributions{list: []attribution{a}}
	as.report(func(f string, args ...any) { fmt.Fprintf(&sb, f, args...) })
	for _, line := range []string{"### push rpc (1,000 msgs)", "| RPC front end | 0.0 | 0.0 | 0.0 | 0.0 | 560.0 | 560.0 |", "| **all** | 1200.0 | 10.0 | 100.0 | 0.0 | 560.0 | **1870.0** |"} {
		if !strings.Contains(sb.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, sb.String())
		}
	}
}

func TestAttributeEmpty(t *testing.T) {
	if _, err := attribute("File: x\nType: cpu\n"); err == nil {
		t.Fatal("no samples: want an error")
	}
}
