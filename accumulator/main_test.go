package accumulator

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpar"
)

// TestMain raises -test.parallel to 4 unless it was given: this package's
// slow tests wait for timers (accumulation windows, delivery timeouts), and the default (GOMAXPROCS, 2 on CI)
// would run those waits two at a time.
func TestMain(m *testing.M) { testpar.Main(m, 4) }
