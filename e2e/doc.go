// Package e2e holds the black-box end-to-end tests of lmq-gateway: they build
// the real binary once, run it as a separate process on loopback ports, and
// talk to it only over its public protocols, the way an LMQ client would.
//
// The harness lives in the package's test files (harness_test.go,
// client_test.go) and is meant to be reused by further tests in this package:
//
//	gw := Start(t)                   // embedded NATS, fresh data dir, ports from --ports-file
//	c := gw.Client(t)                // HTTP helpers bound to t
//	c.Push("q", []byte("hi"), "text/plain")
//	r := c.Pull("q", "1")            // GET /messages/q?t=1
//	gw.Kill(); gw.Restart()          // kill -9, start again on the same data
//
// Gateway also exposes RPCAddr (the MessagePack-RPC address) and NATSURL (the
// NATS server the gateway uses) for tests of other front ends. StartNATS
// starts a stock nats-server inside the test process and StartWithNATS points
// a gateway at it (--nats-url).
//
// The gateway's stderr is kept and printed into the test log when the test
// that started it fails. Set LMQ_E2E_BINARY to test a prebuilt binary instead
// of building ./cmd/lmq-gateway.
//
// The console's browser tests drive a headless Chromium (found in PATH, or
// LMQ_CHROMIUM). Without one they skip, unless LMQ_REQUIRE_CHROMIUM=1 (which
// .ci/run sets): then they fail, so that a CI whose Chromium install failed
// does not pass them silently.
//
// Loads and recoveries are asserted by what was delivered, never by how
// fast: their waits fail only when nothing progressed for a generous while
// (progress_test.go), and durations are logged as figures.
//
// Tests in this package are I/O-bound (they mostly wait for timers inside the
// gateway), so TestMain raises -test.parallel to 8 unless it was given.
package e2e
