// Package testpar sets how many tests of a package run at once, for the
// packages whose slow tests mostly wait for timers of their own (delivery
// timeouts, windows, deadlines): the default, GOMAXPROCS (2 on CI), would
// run those waits two at a time.
package testpar

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// Main runs m with -test.parallel set to n unless the command line gave
// it, and exits with m's code. Call it from a package's TestMain.
func Main(m *testing.M, n int) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
	os.Exit(m.Run())
}
