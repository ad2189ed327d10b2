package wire

import (
	"errors"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

// Message types of MessagePack-RPC.
const (
	typeRequest      = 0
	typeResponse     = 1
	typeNotification = 2
)

// maxParams is more than any method takes; longer params arrays are refused
// without being split, so a hostile one costs nothing.
const maxParams = 8

// ErrNotRPC marks a well-formed MessagePack object that is not a
// MessagePack-RPC request or notification; the connection is closed.
var ErrNotRPC = errors.New("not a MessagePack-RPC request")

// Request is one decoded request or notification.
type Request struct {
	Notification bool
	MsgID        uint32
	// Method is "" when the method field is not a string.
	Method string
	// Params holds the raw bytes of each parameter (slices of the frame);
	// nil with ParamsOK false when params is not an array.
	Params   [][]byte
	ParamsOK bool
}

// ParseRequest checks the RPC envelope of one frame (as ReadFrame returned
// it). Only a broken envelope (not an array, wrong length, wrong type field,
// msgid not a uint32) is an error, wrapping ErrNotRPC; a bad method or
// params is the server's to answer as an RPC error.
func ParseRequest(frame []byte, lim Limits) (Request, error) {
	var req Request
	elems, ok := splitArray(frame, 4, lim.MaxDepth)
	if !ok || len(elems) < 3 {
		return req, fmt.Errorf("%w: not an array of 3 or 4", ErrNotRPC)
	}
	typ, ok := decodeUint32(elems[0])
	switch {
	case ok && typ == typeRequest && len(elems) == 4:
		if req.MsgID, ok = decodeUint32(elems[1]); !ok {
			return req, fmt.Errorf("%w: msgid is not a 32-bit unsigned integer", ErrNotRPC)
		}
		elems = elems[2:]
	case ok && typ == typeNotification && len(elems) == 3:
		req.Notification = true
		elems = elems[1:]
	default:
		return req, fmt.Errorf("%w: bad type field or length", ErrNotRPC)
	}
	req.Method, _ = DecodeString(elems[0])
	req.Params, req.ParamsOK = splitArray(elems[1], maxParams, lim.MaxDepth)
	return req, nil
}

// AppendResponse appends the response [1, msgid, nil, result] to b; result
// is one encoded object.
func AppendResponse(b []byte, msgid uint32, result []byte) []byte {
	b = appendResponseHeader(b, msgid)
	b = appendNil(b)
	return append(b, result...)
}

// AppendErrorResponse appends the response [1, msgid, msg, nil] to b, msg
// as a string in dialect d.
func AppendErrorResponse(b []byte, msgid uint32, msg string, d Dialect) []byte {
	b = appendResponseHeader(b, msgid)
	b = AppendStr(b, msg, d)
	return appendNil(b)
}

func appendResponseHeader(b []byte, msgid uint32) []byte {
	b = AppendArrayHeader(b, 4)
	b = mpack.AppendUint(b, typeResponse)
	return mpack.AppendUint(b, uint64(msgid))
}
