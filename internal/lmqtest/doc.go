// Package lmqtest holds nothing itself: its subpackages are the repository's
// test support, kept in one place (as net/http/httptest is beside net/http)
// so that what ships and what only tests use are told apart at a glance. No
// non-test file imports them; several of them import the core (testcore) or
// embedded (testnats), which is why they sit here and not under the packages
// they serve.
//
//   - testwait: the one way for a test to wait for a condition
//   - testnats: the embedded nats-server of a test, stopped when it ends
//   - testcore: a real core on such a server, closed with the test
//   - fakecore: the in-memory core of the front ends' tests
//   - testnet: a connection accepted through a listener under test
//   - testpki: a throw-away certificate authority, server and client
//   - lmqexporter: the /stats shape LMQ's exporters decode
//   - alloctest: what a piece of code allocates
//   - logbuf: a log destination read while the code under test writes
//   - msgpacktest: checks of MessagePack answers independent of rpc/wire
package lmqtest
