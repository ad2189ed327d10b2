package gateway

import (
	"testing"
	"time"
)

// TestPeersLapse: a peer is dropped once it has been silent for peerLapse,
// not before; a sign of life (a hello, or a notification) keeps it.
func TestPeersLapse(t *testing.T) {
	g := &Gateway{idPfx: []byte{1, 2, 3, 4}}
	p := newPeers(g)
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if p.any() {
		t.Fatal("peers before any was heard")
	}
	p.heard([]byte{9, 9, 9, 9})
	p.heard([]byte{8, 8, 8, 8})
	if !p.any() || len(p.list()) != 2 || p.list()[0] != "08080808" {
		t.Fatalf("after two hellos: %v", p.list())
	}
	now = now.Add(peerLapse - time.Second)
	p.heard([]byte{8, 8, 8, 8})
	p.prune()
	if len(p.list()) != 2 {
		t.Fatalf("pruned before the lapse: %v", p.list())
	}
	now = now.Add(2 * time.Second)
	p.prune()
	if l := p.list(); len(l) != 1 || l[0] != "08080808" || !p.any() {
		t.Fatalf("after the first one's lapse: %v", l)
	}
	now = now.Add(peerLapse)
	p.prune()
	if p.any() || len(p.list()) != 0 {
		t.Fatalf("after both lapsed: %v", p.list())
	}
}
