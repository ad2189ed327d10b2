package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestGroupsWorkload runs the groups workload with tiny numbers against the
// gateway core started in this process (no binary to build, so it is not
// skipped under -short), over HTTP and RPC, and checks that every row is
// there, every message came out and no order was broken. It asserts
// nothing about speed: the phases' time budget (--groups-budget) is set far
// beyond what they take even on a loaded machine, so that a phase cut by it
// means a wedged workload, not a slow one (go test's -timeout is the last
// net).
func TestGroupsWorkload(t *testing.T) {
	t.Parallel()
	s := startNATS(t)
	httpAddr, rpcAddr := startGateway(t, s)
	args := []string{
		"--http", httpAddr, "--rpc", rpcAddr, "--gateway-pid", strconv.Itoa(os.Getpid()),
		"--targets", "http,rpc", "--workloads", "groups",
		"--groups", "0,1,3", "--groups-msgs", "60", "--groups-conc", "4",
		"--groups-pull-wait", "200ms", "--groups-budget", "5m", "--mem-idle", "10ms",
	}
	var out, logs bytes.Buffer
	if err := run(t.Context(), args, &out, &logs); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), logs.String())
	}
	report := out.String()
	for _, want := range []string{
		"## Ordered groups (issue 27)",
		"| http | 0 |", "| http | 1 |", "| http | 3 |",
		"| rpc | 0 |", "| rpc | 1 |", "| rpc | 3 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(report, "| 60 of 60 |"); n != 6 {
		t.Errorf("%d rows with every message delivered, want 6", n)
	}
	if n := strings.Count(report, "| kept |"); n != 4 {
		t.Errorf("%d grouped rows with the order kept, want 4", n)
	}
	if strings.Contains(report, "budget reached") || strings.Contains(report, "INCOMPLETE") {
		t.Errorf("a phase did not finish")
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nlogs:\n%s", report, logs.String())
	}
}

// TestGroupOrderCheck feeds the delivery check bodies out of order and two
// at once, as a broken gateway would hand them out.
func TestGroupOrderCheck(t *testing.T) {
	body := func(idx, group, slot, seq, answered int) []byte {
		b := newBody(memMsgSize)
		binary.BigEndian.PutUint64(b[gbIndex:], uint64(idx))
		binary.BigEndian.PutUint32(b[gbGroup:], uint32(group))
		binary.BigEndian.PutUint32(b[gbSlot:], uint32(slot))
		binary.BigEndian.PutUint32(b[gbSeq:], uint32(seq))
		binary.BigEndian.PutUint64(b[gbAnswered:], uint64(answered))
		return b
	}
	newTracks := func(n int) []groupTrack {
		tr := make([]groupTrack, n)
		for i := range tr {
			tr[i].inFlight, tr[i].lastIndex = -1, -1
			tr[i].lastSeq = map[uint32]int64{}
		}
		return tr
	}
	type delivery struct {
		idx, group, slot, seq, answered int
		again, acked                    bool
	}
	for _, tc := range []struct {
		name string
		ds   []delivery
		want int
	}{
		{"in order, two slots interleaved", []delivery{{0, 0, 0, 0, 0, false, true}, {2, 0, 1, 0, 0, false, true}, {4, 0, 0, 1, 1, false, true}}, 0},
		{"a slot's second before its first", []delivery{{2, 0, 0, 1, 1, false, true}, {0, 0, 0, 0, 0, false, true}}, 3},
		{"two at once", []delivery{{0, 0, 0, 0, 0, false, false}, {2, 0, 1, 0, 0, false, true}}, 1},
		{"redelivered at the head", []delivery{{0, 0, 0, 0, 0, false, true}, {0, 0, 0, 0, 0, true, true}, {2, 0, 0, 1, 1, false, true}}, 0},
		{"redelivered after a later one", []delivery{{0, 0, 0, 0, 0, false, true}, {2, 0, 1, 0, 0, false, true}, {0, 0, 0, 0, 0, true, true}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tracks := newTracks(2)
			var got []string
			violate := func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) }
			b := &bench{}
			for _, d := range tc.ds {
				tr := b.checkGroupDelivery(body(d.idx, d.group, d.slot, d.seq, d.answered), int64(d.idx), d.again, tracks, violate)
				if tr != nil && d.acked {
					tr.inFlight = -1
				}
			}
			if len(got) != tc.want {
				t.Errorf("%d violations, want %d: %q", len(got), tc.want, got)
			}
		})
	}
	if _, err := parseGroupCounts("0,1,x"); err == nil {
		t.Error("--groups 0,1,x accepted")
	}
	if cfg, err := parseFlags([]string{"--workloads", "groups"}, io.Discard); err != nil || len(cfg.groupCounts) != 4 || cfg.groupCounts[0] != 0 {
		t.Errorf("groups defaults: %v, %v", cfg.groupCounts, err)
	}
}
