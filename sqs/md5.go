package sqs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"
)

// md5Hex is SQS's MD5OfMessageBody: hex MD5 of the body's bytes.
func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is SQS's MD5OfMessageAttributes (and, over the system
// attributes, MD5OfMessageSystemAttributes): for each attribute in name
// order, the name, the data type, a transport byte (1 for String and Number,
// 2 for Binary) and the value, each length-prefixed with 4 bytes big-endian
// but the transport byte. "" when there is none, as SQS leaves it out.
func md5OfAttributes(attrs map[string]msgAttr) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := md5.New()
	var n4 [4]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint32(n4[:], uint32(len(b)))
		h.Write(n4[:])
		h.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		if a.binary() {
			h.Write([]byte{2})
			put(a.bin)
		} else {
			h.Write([]byte{1})
			put([]byte(a.StringValue))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// binary reports whether a's data type is Binary or a custom type of it
// ("Binary.png").
func (a msgAttr) binary() bool {
	base, _, _ := strings.Cut(a.DataType, ".")
	return base == "Binary"
}
