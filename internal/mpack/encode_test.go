package mpack

import (
	"bytes"
	"testing"
)

func TestAppendUint(t *testing.T) {
	for _, c := range []struct {
		v    uint64
		want []byte
	}{
		{0, []byte{0x00}},
		{0x7f, []byte{0x7f}},
		{0x80, []byte{0xcc, 0x80}},
		{0x100, []byte{0xcd, 0x01, 0x00}},
		{0x10000, []byte{0xce, 0x00, 0x01, 0x00, 0x00}},
		{1 << 32, []byte{0xcf, 0, 0, 0, 1, 0, 0, 0, 0}},
	} {
		if got := AppendUint(nil, c.v); !bytes.Equal(got, c.want) {
			t.Errorf("AppendUint(%d) = % x, want % x", c.v, got, c.want)
		}
	}
}

func TestAppendStrHeader(t *testing.T) {
	for _, c := range []struct {
		n    int
		str8 bool
		want []byte
	}{
		{31, false, []byte{0xbf}},
		{32, true, []byte{0xd9, 32}},
		{32, false, []byte{0xda, 0x00, 32}}, // LMQ's raw dialect has no str8
		{0x10000, false, []byte{0xdb, 0x00, 0x01, 0x00, 0x00}},
	} {
		if got := AppendStrHeader(nil, c.n, c.str8); !bytes.Equal(got, c.want) {
			t.Errorf("AppendStrHeader(%d, %v) = % x, want % x", c.n, c.str8, got, c.want)
		}
	}
}
