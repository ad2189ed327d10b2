package gateway_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestPushOptionsParse: the one parser of push options, in text (HTTP) and
// as decoded MessagePack values (RPC): what each option becomes, and each
// refusal's text, which names the option and its range.
func TestPushOptionsParse(t *testing.T) {
	t.Parallel()
	const secs = "must be a number of seconds from 0 to 315360000 (10 years)"
	prio := func(p int) *int { return &p }
	for _, c := range []struct {
		name  string
		text  bool // SetText, else SetValue
		value any
		want  gateway.PushOptions
		err   string // the refusal, "" when accepted
	}{
		{gateway.OptDelay, true, "0.25", gateway.PushOptions{Delay: 250 * time.Millisecond}, ""},
		{gateway.OptDelay, true, "1e3", gateway.PushOptions{Delay: 1000 * time.Second}, ""},
		{gateway.OptTTL, true, "315360000", gateway.PushOptions{TTL: mapping.MaxDuration}, ""},
		{gateway.OptTTL, true, "315360000.5", gateway.PushOptions{}, "ttl " + secs},
		{gateway.OptDelay, true, "-1", gateway.PushOptions{}, "delay " + secs},
		{gateway.OptDelay, true, "x", gateway.PushOptions{}, "delay " + secs},
		{gateway.OptDelay, true, "NaN", gateway.PushOptions{}, "delay " + secs},
		{gateway.OptPriority, true, "0", gateway.PushOptions{Priority: prio(0)}, ""},
		{gateway.OptPriority, true, "9", gateway.PushOptions{Priority: prio(9)}, ""},
		{gateway.OptPriority, true, "10", gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, true, "+1", gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, true, " 1", gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptGroup, true, "g", gateway.PushOptions{Group: "g"}, ""},
		{gateway.OptGroup, true, "", gateway.PushOptions{}, "group must not be empty"},
		{gateway.OptIdempotencyKey, true, "k", gateway.PushOptions{IdempotencyKey: "k"}, ""},
		{"colour", true, "red", gateway.PushOptions{}, "unknown push option colour (known: delay, ttl, idempotency_key, priority, group)"},

		{gateway.OptDelay, false, 0.25, gateway.PushOptions{Delay: 250 * time.Millisecond}, ""},
		{gateway.OptDelay, false, float32(2), gateway.PushOptions{Delay: 2 * time.Second}, ""},
		{gateway.OptDelay, false, int64(3), gateway.PushOptions{Delay: 3 * time.Second}, ""},
		{gateway.OptTTL, false, uint64(mapping.MaxSeconds), gateway.PushOptions{TTL: mapping.MaxDuration}, ""},
		{gateway.OptTTL, false, uint64(mapping.MaxSeconds + 1), gateway.PushOptions{}, "ttl " + secs},
		{gateway.OptTTL, false, int64(-1), gateway.PushOptions{}, "ttl " + secs},
		{gateway.OptTTL, false, math.Inf(1), gateway.PushOptions{}, "ttl " + secs},
		{gateway.OptDelay, false, "1", gateway.PushOptions{}, "delay must be a non-negative number of seconds"},
		{gateway.OptDelay, false, nil, gateway.PushOptions{}, "delay must be a non-negative number of seconds"},
		{gateway.OptPriority, false, int64(9), gateway.PushOptions{Priority: prio(9)}, ""},
		{gateway.OptPriority, false, uint64(0), gateway.PushOptions{Priority: prio(0)}, ""},
		{gateway.OptPriority, false, int64(10), gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, false, int64(-1), gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, false, uint64(math.MaxUint64), gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, false, 1.0, gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptPriority, false, "1", gateway.PushOptions{}, "priority must be an integer from 0 to 9"},
		{gateway.OptGroup, false, "g", gateway.PushOptions{Group: "g"}, ""},
		{gateway.OptGroup, false, []byte("g"), gateway.PushOptions{Group: "g"}, ""},
		{gateway.OptGroup, false, []byte{}, gateway.PushOptions{}, "group must not be empty"},
		{gateway.OptGroup, false, int64(7), gateway.PushOptions{}, "group must be a string"},
		{gateway.OptIdempotencyKey, false, []byte("k"), gateway.PushOptions{IdempotencyKey: "k"}, ""},
		{gateway.OptIdempotencyKey, false, int64(17), gateway.PushOptions{}, "idempotency_key must be a string"},
		{"colour", false, int64(1), gateway.PushOptions{}, "unknown push option colour (known: delay, ttl, idempotency_key, priority, group)"},
	} {
		var o gateway.PushOptions
		var err error
		if c.text {
			err = o.SetText(c.name, c.value.(string))
		} else {
			err = o.SetValue(c.name, c.value)
		}
		what := "SetValue " + c.name
		if c.text {
			what = "SetText " + c.name
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %#v: %v", what, c.value, err)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s %#v: error %v, want %q", what, c.value, err, c.err)
		case c.err == "" && !sameOptions(o, c.want):
			t.Errorf("%s %#v: %+v, want %+v", what, c.value, o, c.want)
		}
		if c.err == "" && !gateway.IsPushOption(c.name) {
			t.Errorf("IsPushOption(%q) is false", c.name)
		}
	}
	if gateway.IsPushOption("colour") {
		t.Error("IsPushOption(colour) is true")
	}
}

func sameOptions(a, b gateway.PushOptions) bool {
	if (a.Priority == nil) != (b.Priority == nil) || a.Priority != nil && *a.Priority != *b.Priority {
		return false
	}
	a.Priority, b.Priority = nil, nil
	return a == b
}

// TestPushOptionsCheck: options built in Go (the lmq package, SQS) meet
// the parser's rules in the push: each refusal is ErrInvalid, in the
// parser's words.
func TestPushOptionsCheck(t *testing.T) {
	t.Parallel()
	prio := func(p int) *int { return &p }
	for _, c := range []struct {
		opts gateway.PushOptions
		err  string
	}{
		{gateway.PushOptions{}, ""},
		{gateway.PushOptions{Delay: mapping.MaxDuration, TTL: mapping.MaxDuration, Priority: prio(9), IdempotencyKey: strings.Repeat("k", 256)}, ""},
		{gateway.PushOptions{Priority: prio(0)}, ""},
		{gateway.PushOptions{Delay: -time.Nanosecond}, "invalid request: delay must be a number of seconds from 0 to 315360000 (10 years)"},
		{gateway.PushOptions{TTL: mapping.MaxDuration + 1}, "invalid request: ttl must be a number of seconds from 0 to 315360000 (10 years)"},
		{gateway.PushOptions{Priority: prio(10)}, "invalid request: priority must be an integer from 0 to 9"},
		{gateway.PushOptions{Priority: prio(-1)}, "invalid request: priority must be an integer from 0 to 9"},
		{gateway.PushOptions{IdempotencyKey: strings.Repeat("k", 257)}, "invalid request: idempotency key longer than 256 bytes"},
		{gateway.PushOptions{IdempotencyKey: "a\x00b"}, "invalid request: idempotency key has control characters"},
	} {
		err := c.opts.Check()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Check(%+v): %v", c.opts, err)
		case c.err != "" && (err == nil || err.Error() != c.err || !errors.Is(err, gateway.ErrInvalid)):
			t.Errorf("Check(%+v) = %v, want ErrInvalid %q", c.opts, err, c.err)
		}
	}
}
