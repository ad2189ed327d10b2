package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/ops"
)

// The long history sums every queue per minute, starts at the first sample,
// reads stale minutes as zeros and stays LongLen points long.
func TestSamplerLongHistory(t *testing.T) {
	st := ops.NewStats(ops.StatsOptions{})
	st.Pushed("a", 1) // before the console watched: not counted
	s := newSampler(st)
	t0 := time.Unix(1_800_000_000/60*60, 0) // on a minute
	if h := s.longHistory(&s.long, t0); len(h.Push) != 0 || !h.Since.IsZero() {
		t.Fatalf("before any sample: %+v", h)
	}
	s.sample(t0)
	st.Pushed("a", 1)
	st.Pushed("b", 1)
	st.Pulled("a", time.Second)
	s.sample(t0.Add(SampleInterval))
	st.Pushed("b", 1)
	s.sample(t0.Add(2 * SampleInterval))
	// Next minute: one pull.
	st.Pulled("b", time.Second)
	s.sample(t0.Add(time.Minute + SampleInterval))

	h := s.longHistory(&s.long, t0.Add(time.Minute+2*SampleInterval))
	if !h.Start.Equal(t0) || !h.Since.Equal(t0) || h.Step != 60 {
		t.Fatalf("start %v since %v step %v", h.Start, h.Since, h.Step)
	}
	if len(h.Push) != 2 || h.Push[0] != 3 || h.Push[1] != 0 || h.Pull[0] != 1 || h.Pull[1] != 1 {
		t.Fatalf("push %v pull %v", h.Push, h.Pull)
	}

	// Three hours later, with nothing since: LongLen points of zeros, the
	// old minutes gone.
	later := t0.Add(3 * time.Hour)
	s.sample(later)
	h = s.longHistory(&s.long, later)
	if len(h.Push) != LongLen || !h.Start.Equal(later.Add(-(LongLen-1)*LongStep)) {
		t.Fatalf("%d points from %v", len(h.Push), h.Start)
	}
	for i, v := range h.Push {
		if v != 0 || h.Pull[i] != 0 {
			t.Fatalf("point %d: %d/%d, want zeros", i, v, h.Pull[i])
		}
	}
	if LongLen*LongStep < time.Hour {
		t.Fatal("the long history must cover at least an hour")
	}

	// The API's shape.
	b, _ := json.Marshal(Rates{Gateway: "g", This: h, Cluster: h, Gateways: []string{"g"}, Series: PrometheusSeries})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"gateway", "this", "cluster", "gateways", "shared", "series"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %.200s", k, b)
		}
	}
	for _, k := range []string{"step", "start", "since", "push", "pull"} {
		if _, ok := m["this"].(map[string]any)[k]; !ok {
			t.Errorf("no this.%q in %.200s", k, b)
		}
	}
}

// bus is a RatesBus in memory: what is published is heard by every
// subscriber, as on NATS.
type bus struct{ subs []func([]byte) }

func (b *bus) PublishRates(data []byte) error {
	for _, f := range b.subs {
		f(data)
	}
	return nil
}

func (b *bus) SubscribeRates(f func([]byte)) (func(), error) {
	b.subs = append(b.subs, f)
	return func() {}, nil
}

// Two gateways' samplers on one bus: each one's cluster history is the sum
// of both, its own history its own; a gateway silent for PeerLapse is no
// longer live; garbage and its own echo are ignored.
func TestSamplerClusterRates(t *testing.T) {
	t0 := time.Unix(1_800_000_000/60*60, 0)
	clock := t0
	var b bus
	var st [2]*ops.Stats
	var s [2]*sampler
	for i, id := range []string{"g1", "g2"} {
		st[i] = ops.NewStats(ops.StatsOptions{})
		s[i] = newSampler(st[i])
		s[i].id, s[i].bus, s[i].now = id, &b, func() time.Time { return clock }
		_, _ = b.SubscribeRates(s[i].heard)
		s[i].sample(clock)
	}
	st[0].Pushed("a", 1)
	st[0].Pushed("a", 1)
	st[1].Pushed("b", 1)
	st[1].Pulled("b", time.Second)
	clock = t0.Add(SampleInterval)
	for i := range s {
		d, ok := s[i].sample(clock)
		if !ok {
			t.Fatal("no sum")
		}
		s[i].publish(d)
	}
	_ = b.PublishRates([]byte("not json"))
	for i, want := range [][2]uint64{{2, 0}, {1, 1}} {
		own := s[i].longHistory(&s[i].long, clock)
		all := s[i].longHistory(&s[i].cluster, clock)
		if own.Push[0] != want[0] || own.Pull[0] != want[1] {
			t.Errorf("gateway %d: own %v/%v", i, own.Push, own.Pull)
		}
		if all.Push[0] != 3 || all.Pull[0] != 1 {
			t.Errorf("gateway %d: cluster %v/%v, want 3/1", i, all.Push, all.Pull)
		}
	}
	if got := s[0].livePeers(); len(got) != 1 || got[0] != "g2" {
		t.Fatalf("live peers %v", got)
	}
	clock = clock.Add(PeerLapse + time.Second)
	if got := s[0].livePeers(); len(got) != 0 {
		t.Fatalf("live peers after the lapse %v", got)
	}
}
