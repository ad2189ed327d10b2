// Package msgpacktest checks the MessagePack a test got back, independently
// of the encoder and decoder under test (rpc/wire): it reads with
// vmihailenco/msgpack, not with what it checks.
package msgpacktest

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// TypeBytes lists the type bytes of every header in the one object b holds,
// in order.
func TypeBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out []byte
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	var rec func()
	rec = func() {
		c, err := dec.PeekCode()
		if err != nil {
			t.Fatalf("PeekCode: %v", err)
		}
		out = append(out, c)
		switch {
		case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
			n, _ := dec.DecodeArrayLen()
			for range n {
				rec()
			}
		case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
			n, _ := dec.DecodeMapLen()
			for range 2 * n {
				rec()
			}
		default:
			if err := dec.Skip(); err != nil {
				t.Fatalf("Skip: %v", err)
			}
		}
	}
	rec()
	return out
}

// AssertRawDialect fails the test if b uses a type LMQ's raw dialect does
// not have (str8, bin8/16/32): old clients cannot read them.
func AssertRawDialect(t testing.TB, b []byte) {
	t.Helper()
	for _, c := range TypeBytes(t, b) {
		switch c {
		case msgpcode.Str8, msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32:
			t.Fatalf("answer uses type 0x%02x, not in LMQ's dialect: % x", c, b)
		}
	}
}
