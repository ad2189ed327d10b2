package server

import (
	"context"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/rpc"
)

// TestRPCAnswerBoundsDefault: Config's RPC answer bounds left 0, as a Go
// program embedding the server leaves them (lmq.Open does), are the
// documented defaults, 4 MiB per connection and 256 MiB across them; a
// negative one is no bound. (Issue 40, item 12: rpc.New took the total's 0
// as no bound, so an embedded server had none.)
func TestRPCAnswerBoundsDefault(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		perConn, total         int // Config's
		wantPerConn, wantTotal int // in effect; negative: none
	}{
		{"left 0", 0, 0, rpc.DefaultMaxAnswerBytes, rpc.DefaultMaxTotalAnswers},
		{"negative", -1, -1, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.RPCMaxAnswerBytes, cfg.RPCMaxTotalAnswerBytes = tc.perConn, tc.total
			s, err := New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			}()
			o := s.rpc.Options()
			if o.MaxAnswerBytes != tc.wantPerConn || o.MaxTotalAnswerBytes != tc.wantTotal {
				t.Errorf("RPC answer bounds in effect: %d per connection, %d in total; want %d, %d",
					o.MaxAnswerBytes, o.MaxTotalAnswerBytes, tc.wantPerConn, tc.wantTotal)
			}
		})
	}
}
