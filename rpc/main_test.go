package rpc

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises -test.parallel to 4 unless it was given: this package's
// slow tests wait for timers (request and idle deadlines, delivery timeouts), and the default (GOMAXPROCS, 2 on CI)
// would run those waits two at a time.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}
