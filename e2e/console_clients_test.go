package e2e

import (
	"testing"
)

// TestConsoleClients: the Clients page lists an HTTP long poll waiting now
// (kind, address, queue), counts it by kind, and counts an open RPC
// connection by address; the pull gone, the list empties.
func TestConsoleClients(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	b := newBrowser(t, g.HTTP)
	_ = dialRPC(t, g.RPCAddr)

	done := make(chan *Response, 1)
	go func() { done <- c.Pull("clients/jobs", "60") }()

	b.open("#/clients")
	b.waitJS("the waiting HTTP pull", `(() => {
		const tr = document.querySelector('#pulls tbody tr[data-kind="http"]');
		return !!tr && tr.textContent.includes('clients/jobs') && tr.textContent.includes('127.0.0.1:') && !!tr.querySelector('time');
	})()`)
	b.waitText(`#client-counts dd[data-kind="http"]`, "1")
	b.waitJS("the RPC connection", `(() => {
		const tr = document.querySelector('#rpc-table tr[data-addr="127.0.0.1"]');
		return !!tr && tr.querySelector('td:last-child').textContent === '1';
	})()`)
	b.screenshot("clients")
	b.labelled("clients")

	c.Push("clients/jobs", []byte("x"), "text/plain")
	ExpectMessage(t, <-done, "clients/jobs", "x")
	b.waitContains("#pulls tbody", "No pull is waiting.")
	b.waitText(`#client-counts dd[data-kind="all"]`, "0")
	b.noErrors()
}
