package peers

import (
	"testing"
	"time"
)

// TestPeersLapse: a peer is dropped once it has been silent for peerLapse,
// not before; a sign of life (a hello, or a notification) keeps it.
func TestPeersLapse(t *testing.T) {
	p := New(nil, []byte{1, 2, 3, 4}, nil, nil)
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if p.Any() {
		t.Fatal("peers before any was heard")
	}
	p.Heard([]byte{9, 9, 9, 9})
	p.Heard([]byte{8, 8, 8, 8})
	if !p.Any() || len(p.List()) != 2 || p.List()[0] != "08080808" {
		t.Fatalf("after two hellos: %v", p.List())
	}
	now = now.Add(peerLapse - time.Second)
	p.Heard([]byte{8, 8, 8, 8})
	p.prune()
	if len(p.List()) != 2 {
		t.Fatalf("pruned before the lapse: %v", p.List())
	}
	now = now.Add(2 * time.Second)
	p.prune()
	if l := p.List(); len(l) != 1 || l[0] != "08080808" || !p.Any() {
		t.Fatalf("after the first one's lapse: %v", l)
	}
	now = now.Add(peerLapse)
	p.prune()
	if p.Any() || len(p.List()) != 0 {
		t.Fatalf("after both lapsed: %v", p.List())
	}
}
