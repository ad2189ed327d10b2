package waits

import (
	"context"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		max     int
		takes   int
		granted int
	}{
		{"no bound", 0, 5, 5},
		{"below the bound", 3, 2, 2},
		{"at the bound", 3, 3, 3},
		{"beyond the bound", 3, 5, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.max)
			var releases []func()
			for i := range tc.takes {
				kind := ClientHTTP
				if i%2 == 1 {
					kind = ClientRPC
				}
				// The later ones waited longer: the list is longest first.
				rel, ok := l.Take(Pull{Client: Client{Kind: kind}, Waits: "q", Since: t0.Add(-time.Duration(i) * time.Second)})
				if ok {
					releases = append(releases, rel)
				}
			}
			if len(releases) != tc.granted || l.Count() != tc.granted {
				t.Fatalf("granted %d, count %d; want %d", len(releases), l.Count(), tc.granted)
			}
			pulls, byKind := l.List()
			if len(pulls) != tc.granted || byKind[ClientHTTP]+byKind[ClientRPC] != tc.granted {
				t.Fatalf("listed %d (%v), want %d", len(pulls), byKind, tc.granted)
			}
			for i := 1; i < len(pulls); i++ {
				if pulls[i].Since.Before(pulls[i-1].Since) {
					t.Fatalf("not longest waiting first: %v", pulls)
				}
			}
			for _, rel := range releases {
				rel()
			}
			if pulls, _ := l.List(); l.Count() != 0 || len(pulls) != 0 {
				t.Fatalf("after the releases: count %d, %d listed", l.Count(), len(pulls))
			}
		})
	}
}

func TestClientOf(t *testing.T) {
	if c := ClientOf(context.Background()); c != (Client{Kind: ClientGo}) {
		t.Fatalf("without WithClient: %+v", c)
	}
	ctx := WithClient(context.Background(), ClientSQS, "192.0.2.1:5")
	if c := ClientOf(ctx); c != (Client{Kind: ClientSQS, Addr: "192.0.2.1:5"}) {
		t.Fatalf("with WithClient: %+v", c)
	}
}
