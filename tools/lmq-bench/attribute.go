package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// With --profile, every profiled cell's CPU profile is also read back and
// each sample put in one row by the goroutine it ran on (its owner) and in
// one column by its leaf (the kind of work), in µs per message of the cell:
// the table issue 30 asks for, saying which part of a message's cost is
// JetStream's, the kernel's or the Go runtime's. It reads the profile with
// `go tool pprof -traces` (Go profiles carry their symbols), so it needs the
// go command; without it the section says so.

// Owners, in the order a sample is tested against them: a stack through
// nats-server's code is JetStream's even when a gateway goroutine called it.
const (
	ownJetStream = "JetStream (nats-server)"
	ownClient    = "nats.go client"
	ownCore      = "gateway core"
	ownRPC       = "RPC front end"
	ownHTTP      = "HTTP front end (net/http, httpapi, ops)"
	ownSched     = "Go runtime: idle Ps"
	ownGC        = "Go runtime: background GC"
	ownOther     = "other"
)

// Kinds of work, by the sample's leaf frame.
const (
	kindCode   = "code"
	kindAlloc  = "alloc"
	kindGC     = "GC"
	kindSched  = "scheduler"
	kindKernel = "kernel"
)

var (
	attrOwners = []string{ownJetStream, ownRPC, ownHTTP, ownClient, ownCore, ownSched, ownGC, ownOther}
	attrKinds  = []string{kindCode, kindAlloc, kindGC, kindSched, kindKernel}

	traceValue = regexp.MustCompile(`^\s+([0-9.]+)(ns|us|µs|ms|s)\s+(\S.*)$`)
	gcFrame    = regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcDrain|scan[oO]bject|markroot|greyobject|gcAssistAlloc|bgsweep|sweepone|gcMarkDone|gcStart|wbBuf|bulkBarrierPreWrite|tryDeferToSpanScan|typePointers|findObject|scanstack|scanframe)`)
	schedLeaf  = regexp.MustCompile(`^runtime\.(schedule|findRunnable|park_m|gopark|goready|ready|wakep|runqgrab|stealWork|mcall|casgstatus|notewakeup|notesleep|startm|stopm|handoffp|execute|resetspinning|netpoll|selectgo|chanrecv|chansend|send|recv|lock2|unlock2|semacquire|semrelease|gosched|mPark|futexsleep|futexwakeup|sellock|selunlock|acquireSudog|releaseSudog|runqput|runqget|globrunqget|checkTimers|nanotime|exitsyscall|entersyscall|reentersyscall|.*[tT]imer)`)
	allocLeaf  = regexp.MustCompile(`^runtime\.(mallocgc|newobject|makeslice|growslice|memclrNoHeapPointers|nextFreeFast|mcache|refill|makemap|rawstring|slicebytetostring|concatstring|.*[sS]pan)`)
)

// attribution is one profiled cell's table: CPU per owner and kind, and the
// messages the cell counted.
type attribution struct {
	cell  string
	msgs  int64
	total time.Duration
	cpu   map[string]map[string]time.Duration
}

// attributions collects the tables of a run.
type attributions struct {
	mu   sync.Mutex
	list []attribution
	err  error // the first failure to read a profile back
}

// add reads the profile at path back for the cell and keeps its table.
func (a *attributions) add(ctx context.Context, cell, path string, msgs int64) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", path).Output()
	var t attribution
	if err == nil {
		t, err = attribute(string(out))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if a.err == nil {
			a.err = fmt.Errorf("reading %s back with go tool pprof: %w", path, err)
		}
		return
	}
	t.cell, t.msgs = cell, msgs
	a.list = append(a.list, t)
}

// attribute classifies the samples of `go tool pprof -traces` output.
func attribute(traces string) (attribution, error) {
	t := attribution{cpu: map[string]map[string]time.Duration{}}
	var frames []string
	var value time.Duration
	flush := func() {
		if len(frames) > 0 {
			o, k := sampleOwner(frames), sampleKind(frames)
			if t.cpu[o] == nil {
				t.cpu[o] = map[string]time.Duration{}
			}
			t.cpu[o][k] += value
			t.total += value
		}
		frames, value = nil, 0
	}
	sc := bufio.NewScanner(strings.NewReader(traces))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		if frames == nil {
			m := traceValue.FindStringSubmatch(line)
			if m == nil {
				continue // the header, or a sample's labels
			}
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return t, fmt.Errorf("sample value %q: %w", m[1], err)
			}
			unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[2]]
			value = time.Duration(v * float64(unit))
			frames = append(frames, strings.TrimSpace(m[3]))
			continue
		}
		if f := strings.TrimSpace(line); f != "" {
			frames = append(frames, f)
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return t, err
	}
	if t.total == 0 {
		return t, fmt.Errorf("no samples")
	}
	return t, nil
}

// sampleOwner is the owner of a sample by its stack (leaf first).
func sampleOwner(frames []string) string {
	has := func(sub string) bool {
		for _, f := range frames {
			if strings.Contains(f, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("runtime.gcBgMarkWorker") || has("runtime.bgsweep") || has("runtime.bgscavenge"):
		return ownGC
	case has("nats-io/nats-server/"):
		return ownJetStream
	case has("nats-io/nats%2ego") || has("nats-io/nats.go"):
		return ownClient
	case has("lmq-gateway/gateway") || has("lmq-gateway/store") || has("lmq-gateway/mapping") || has("lmq-gateway/accumulator"):
		return ownCore
	case has("lmq-gateway/rpc."):
		return ownRPC
	case has("lmq-gateway/httpapi") || has("lmq-gateway/ops") || has("net/http."):
		return ownHTTP
	case has("runtime.schedule") || has("runtime.mstart") || has("runtime.sysmon") || has("runtime.mcall"):
		return ownSched
	}
	return ownOther
}

// sampleKind is the kind of work of a sample by its leaf.
func sampleKind(frames []string) string {
	leaf := frames[0]
	switch {
	case strings.Contains(leaf, "Syscall6") || strings.Contains(leaf, "RawSyscall") || strings.HasPrefix(leaf, "runtime.futex") ||
		strings.Contains(leaf, "EpollWait") || leaf == "runtime.usleep" || leaf == "runtime.osyield" || leaf == "runtime.madvise":
		return kindKernel
	}
	for _, f := range frames {
		if gcFrame.MatchString(f) {
			return kindGC
		}
	}
	if schedLeaf.MatchString(leaf) {
		return kindSched
	}
	for _, f := range frames[:min(6, len(frames))] {
		if strings.HasPrefix(f, "runtime.schedule") || strings.HasPrefix(f, "runtime.mcall") || strings.HasPrefix(f, "runtime.park_m") {
			return kindSched
		}
	}
	if allocLeaf.MatchString(leaf) {
		return kindAlloc
	}
	return kindCode
}

// report writes the tables (µs per message), or why there are none.
func (a *attributions) report(w func(string, ...any)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.list) == 0 && a.err == nil {
		return
	}
	w("## Where the gateway's CPU goes (--profile)\n\n")
	w("Each profiled cell's samples, µs per message of the cell: a row per owner (the goroutine a sample ran on: nats-server's, the nats.go client's reader and flusher and the gateway's calls into it, the gateway's core, the front end, the runtime's own), a column per kind of work by the sample's leaf (a syscall is the kernel; park, wake and find-runnable are the scheduler; the allocator; the collector; anything else is code). The profile samples a little less than the process's CPU in the tables above.\n\n")
	if a.err != nil {
		w("- **not every profile could be read back: %v**\n\n", a.err)
	}
	for _, t := range a.list {
		if t.msgs == 0 {
			continue
		}
		per := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3/float64(t.msgs)) }
		w("### %s (%s msgs)\n\n", t.cell, fmtInt(t.msgs))
		w("| owner | %s | total |\n|---|%s---:|\n", strings.Join(attrKinds, " | "), strings.Repeat("---:|", len(attrKinds)))
		cols := map[string]time.Duration{}
		for _, o := range attrOwners {
			row := t.cpu[o]
			if row == nil {
				continue
			}
			var sum time.Duration
			cells := make([]string, len(attrKinds))
			for i, k := range attrKinds {
				cells[i] = per(row[k])
				sum += row[k]
				cols[k] += row[k]
			}
			w("| %s | %s | %s |\n", o, strings.Join(cells, " | "), per(sum))
		}
		cells := make([]string, len(attrKinds))
		for i, k := range attrKinds {
			cells[i] = per(cols[k])
		}
		w("| **all** | %s | **%s** |\n\n", strings.Join(cells, " | "), per(t.total))
	}
}
