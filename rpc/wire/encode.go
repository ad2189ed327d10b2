package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

// Encoding. Every append function writes the smallest form allowed in the
// dialect; those that take none write the same bytes in both.

func appendNil(b []byte) []byte { return append(b, 0xc0) }

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// AppendInt appends v as a fixint or (u)int 8/16/32/64.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return mpack.AppendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(int8(v)))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(int8(v)))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(int16(v)))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(int32(v)))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// AppendFloat64 appends v as float64.
func AppendFloat64(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(v))
}

func appendFloat32(b []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(append(b, 0xca), math.Float32bits(v))
}

// AppendArrayHeader appends the header of an array of n elements.
func AppendArrayHeader(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

// AppendMapHeader appends the header of a map of n pairs.
func AppendMapHeader(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// appendStrHeader writes a string header; only the current dialect uses str8.
func appendStrHeader(b []byte, n int, d Dialect) []byte {
	return mpack.AppendStrHeader(b, n, d == DialectCurrent)
}

// appendBinHeader writes a binary header: bin in the current dialect, raw in
// LMQ's.
func appendBinHeader(b []byte, n int, d Dialect) []byte {
	if d == DialectRaw {
		return appendStrHeader(b, n, d)
	}
	switch {
	case n <= math.MaxUint8:
		return append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
}

// AppendStr appends s as a string in dialect d.
func AppendStr(b []byte, s string, d Dialect) []byte {
	return append(appendStrHeader(b, len(s), d), s...)
}

// AppendBin appends v as a binary in dialect d: bin, or raw (a string) in
// LMQ's.
func AppendBin(b []byte, v []byte, d Dialect) []byte {
	return append(appendBinHeader(b, len(v), d), v...)
}

// AppendAny encodes plain Go values, map keys sorted so answers are stable.
// Types it does not know are encoded by vmihailenco/msgpack and transcoded to
// the dialect.
func AppendAny(b []byte, v any, d Dialect) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return appendNil(b), nil
	case bool:
		return AppendBool(b, v), nil
	case int:
		return AppendInt(b, int64(v)), nil
	case int8:
		return AppendInt(b, int64(v)), nil
	case int16:
		return AppendInt(b, int64(v)), nil
	case int32:
		return AppendInt(b, int64(v)), nil
	case int64:
		return AppendInt(b, v), nil
	case uint:
		return mpack.AppendUint(b, uint64(v)), nil
	case uint8:
		return mpack.AppendUint(b, uint64(v)), nil
	case uint16:
		return mpack.AppendUint(b, uint64(v)), nil
	case uint32:
		return mpack.AppendUint(b, uint64(v)), nil
	case uint64:
		return mpack.AppendUint(b, v), nil
	case float32:
		return appendFloat32(b, v), nil
	case float64:
		return AppendFloat64(b, v), nil
	case string:
		return AppendStr(b, v, d), nil
	case []byte:
		return AppendBin(b, v, d), nil
	case []string:
		b = AppendArrayHeader(b, len(v))
		for _, s := range v {
			b = AppendStr(b, s, d)
		}
		return b, nil
	case []any:
		b = AppendArrayHeader(b, len(v))
		for _, e := range v {
			var err error
			if b, err = AppendAny(b, e, d); err != nil {
				return nil, err
			}
		}
		return b, nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = AppendMapHeader(b, len(v))
		for _, k := range keys {
			b = AppendStr(b, k, d)
			var err error
			if b, err = AppendAny(b, v[k], d); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	enc, err := marshalSorted(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return Transcode(b, enc, d, DefaultMaxDepth)
}

func marshalSorted(v any) ([]byte, error) {
	var sb strings.Builder
	enc := msgpack.NewEncoder(&sb)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(sb.String()), nil
}
