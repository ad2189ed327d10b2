package gateway

import "github.com/lmq-gateway/lmq-gateway/gateway/errkind"

// ErrorKind is what an error means to a client, whatever the protocol: the
// one classification of the core's errors that every front end's mapper
// switches on (package errkind says what each kind covers, and the
// precedence KindOf applies).
type ErrorKind = errkind.Kind

// The kinds (errkind.None…).
const (
	KindNone           = errkind.None
	KindInvalid        = errkind.Invalid
	KindNotFound       = errkind.NotFound
	KindTooManyQueues  = errkind.TooManyQueues
	KindTooLarge       = errkind.TooLarge
	KindHeaderTooLarge = errkind.HeaderTooLarge
	KindUnknown        = errkind.Unknown
	KindUnavailable    = errkind.Unavailable
	KindCanceled       = errkind.Canceled
	KindInternal       = errkind.Internal
)

// KindOf classifies err (errkind.Of).
func KindOf(err error) ErrorKind { return errkind.Of(err) }
