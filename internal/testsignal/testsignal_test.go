package testsignal

import (
	"fmt"
	"sync"
	"testing"
)

// fakeTB records a failure instead of ending the test, so that the
// failures of the helpers can be checked.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// TestOffCostsNothing: a signal that no test turned on (the zero value, or
// a nil pointer) takes values without allocating or blocking.
func TestOffCostsNothing(t *testing.T) {
	var s Signal[string]
	var nilSig *Signal[string]
	if n := testing.AllocsPerRun(100, func() { s.Signal("x"); nilSig.Signal("y") }); n != 0 {
		t.Fatalf("%v allocations per signal while off", n)
	}
}

// TestWaitAndEmpty: values signalled after Init are waited for in order,
// WaitFor skips the others, RequireEmpty sees what is left.
func TestWaitAndEmpty(t *testing.T) {
	var s Signal[int]
	s.Signal(-1) // before Init: lost
	s.Init(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // from another goroutine, as a component signals
		defer wg.Done()
		for i := range 5 {
			s.Signal(i)
		}
	}()
	if v := s.WaitOrTimeout(); v != 0 {
		t.Fatalf("first value %d, want 0", v)
	}
	if v := s.WaitFor("an odd value", func(v int) bool { return v%2 == 1 }); v != 1 {
		t.Fatalf("first odd value %d, want 1", v)
	}
	if got := s.WaitN(2, "two values", func(int) bool { return true }); got[0] != 2 || got[1] != 3 {
		t.Fatalf("next two %v, want [2 3]", got)
	}
	wg.Wait()
	seen := 0
	s.WaitUntil("the last value", func() bool { seen++; return seen == 2 }) // 4 is taken
	f := &fakeTB{TB: t}
	var u Signal[int]
	u.Init(f)
	u.Signal(4)
	u.RequireEmpty()
	if f.failed == "" {
		t.Fatal("RequireEmpty passed with a value pending")
	}
	if n := s.Drain(); n != 0 {
		t.Fatalf("drained %d, want 0", n)
	}
	s.RequireEmpty()
}

// TestFullDrops: a full buffer never blocks the component; the test hears
// of the dropped values at its next wait.
func TestFullDrops(t *testing.T) {
	f := &fakeTB{TB: t}
	var s Signal[int]
	s.Init(f)
	for i := range Buffer + 3 {
		s.Signal(i)
	}
	s.Drain()
	if f.failed == "" {
		t.Fatal("dropped values not reported")
	}
}
