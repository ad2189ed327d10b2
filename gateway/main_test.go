package gateway_test

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpar"
)

// TestMain raises -test.parallel to 4 unless it was given: most of this
// package's tests wait for the core's timers (delivery timeouts, delays,
// TTLs of a second or so) on their own embedded NATS server, and the
// default (GOMAXPROCS, 2 on CI) would run those waits two at a time.
func TestMain(m *testing.M) { testpar.Main(m, 4) }
