package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/msgpacktest"
)

// TestAppendResponse: both answers are [1, msgid, error, result], one object
// each, the error string in the dialect asked for.
func TestAppendResponse(t *testing.T) {
	long := strings.Repeat("e", 40) // str8 in the current dialect, str16 in the raw one
	for _, d := range []Dialect{DialectRaw, DialectCurrent} {
		ok := AppendResponse([]byte{0xff}, 70000, AppendStr(nil, "ok", d))
		if ok[0] != 0xff {
			t.Fatalf("%v: AppendResponse overwrote what b held", d)
		}
		var got []any
		if err := msgpack.Unmarshal(ok[1:], &got); err != nil {
			t.Fatalf("%v: % x: %v", d, ok[1:], err)
		}
		if want := []any{int8(1), uint32(70000), nil, "ok"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%v: result response = %#v, want %#v", d, got, want)
		}
		bad := AppendErrorResponse(nil, 3, long, d)
		if d == DialectRaw {
			msgpacktest.AssertRawDialect(t, bad)
		}
		got = nil
		if err := msgpack.Unmarshal(bad, &got); err != nil {
			t.Fatalf("%v: % x: %v", d, bad, err)
		}
		if want := []any{int8(1), int8(3), long, nil}; !reflect.DeepEqual(got, want) {
			t.Errorf("%v: error response = %#v, want %#v", d, got, want)
		}
		if n, err := walk(bad, DefaultMaxDepth, nil); err != nil || n != len(bad) {
			t.Errorf("%v: error response is not one object: %d of %d, %v", d, n, len(bad), err)
		}
	}
}

// TestDecodeValueLimits: DecodeValue takes its bounds from Limits, zero
// fields meaning the defaults.
func TestDecodeValueLimits(t *testing.T) {
	src, _ := msgpack.Marshal(map[string]any{"pack": 0.5, "retry": []any{1, 2, 3}})
	v, err := DecodeValue(src, Limits{})
	if want := map[string]any{"pack": 0.5, "retry": []any{int64(1), int64(2), int64(3)}}; err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("DecodeValue = %#v, %v", v, err)
	}
	if _, err := DecodeValue(src, Limits{MaxElements: 4}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("4 elements: %v, want ErrTooLarge", err)
	}
	if _, err := DecodeValue(src, Limits{MaxDepth: 1}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth 1: %v, want ErrTooDeep", err)
	}
	if _, err := DecodeValue([]byte{0xa5, 'a'}, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("short string: %v, want ErrMalformed", err)
	}
}
