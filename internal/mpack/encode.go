package mpack

import (
	"encoding/binary"
	"math"
)

// The encoding primitives that more than one writer of MessagePack needs:
// the RPC server's codec and the bench's no-op RPC ceiling, which must
// write what the server writes. Each writes the smallest form allowed.

// AppendUint appends v as a positive fixint or uint 8/16/32/64.
func AppendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// AppendStrHeader appends the header of a string of n bytes. str8 says
// whether str8 may be used: today's MessagePack has it, LMQ's older "raw"
// dialect (fixstr, str16, str32) does not, and old clients cannot read it.
func AppendStrHeader(b []byte, n int, str8 bool) []byte {
	switch {
	case n <= 31:
		return append(b, 0xa0|byte(n))
	case n <= math.MaxUint8 && str8:
		return append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
}
