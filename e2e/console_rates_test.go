package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestConsoleClusterRates: two gateways; the pushes made through one show
// in the other's cluster history (/ui/api/rates), not in its own, and each
// hears the other.
func TestConsoleClusterRates(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and two rate intervals")
	}
	t.Parallel()
	gws := StartEmbeddedCluster(t, 2)
	c0, c1 := gws[0].Client(t), gws[1].Client(t)
	for i := range 5 {
		c0.Push("rates/q", []byte(fmt.Sprint(i)), "text/plain")
	}
	type hist struct {
		Step float64  `json:"step"`
		Push []uint64 `json:"push"`
	}
	type rates struct {
		Gateway  string   `json:"gateway"`
		This     hist     `json:"this"`
		Cluster  hist     `json:"cluster"`
		Gateways []string `json:"gateways"`
		Shared   bool     `json:"shared"`
		Series   []string `json:"series"`
	}
	var r rates
	sum := func(v []uint64) (n uint64) {
		for _, x := range v {
			n += x
		}
		return n
	}
	read := func(c *Client) {
		resp := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/rates", nil)
		r = rates{}
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			t.Fatalf("%v: %s", err, resp.Body)
		}
	}
	testwait.WithinDetail(t, 60*time.Second, "the other gateway's pushes in the cluster's rates", func() (bool, string) {
		read(c1)
		return r.Shared && len(r.Gateways) == 2 && sum(r.Cluster.Push) == 5 && sum(r.This.Push) == 0,
			fmt.Sprintf("%+v", r)
	})
	if r.Cluster.Step != 60 || len(r.Series) == 0 {
		t.Fatalf("%+v", r)
	}
	testwait.WithinDetail(t, 30*time.Second, "the gateway's own pushes in both histories", func() (bool, string) {
		read(c0)
		return len(r.Gateways) == 2 && r.Gateways[0] == r.Gateway && sum(r.This.Push) == 5 && sum(r.Cluster.Push) == 5,
			fmt.Sprintf("%+v", r)
	})
}
