// Package testnet holds what tests need of real TCP beyond the standard
// library: a connection accepted through a listener under test.
package testnet

import (
	"net"
	"testing"
)

// Accept dials l's address and accepts that connection through l (a
// wrapper under test, say): the client's end and the server's. Both are
// closed when the test ends.
func Accept(t testing.TB, l net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}
