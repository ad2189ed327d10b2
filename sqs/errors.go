package sqs

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// apiError is an answer in SQS's error shape. Shape is the error's name in
// the JSON protocol ("QueueDoesNotExist", sent as
// "com.amazonaws.sqs#QueueDoesNotExist"), Code the query protocol's and the
// x-amzn-query-error header's ("AWS.SimpleQueueService.NonExistentQueue").
type apiError struct {
	Status  int
	Shape   string
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// sender reports whether the client is at fault (SQS's "Sender" type).
func (e *apiError) sender() bool { return e.Status < 500 }

// AuthError is how Options.Authenticate says why a request is refused, in
// SQS's terms: Code as SignatureDoesNotMatch, InvalidClientTokenId,
// IncompleteSignature, MissingAuthenticationToken, RequestExpired. Any other
// error refuses it as AccessDenied.
type AuthError struct {
	Code, Message string
	// Status is the HTTP status (0: 403, SQS's for most refusals; a
	// malformed signature is 400).
	Status int
}

func (e *AuthError) Error() string { return e.Code + ": " + e.Message }

// errorf makes an apiError whose JSON shape name and query code are the same
// (the common errors of every AWS query service).
func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Shape: code, Code: code, Message: fmt.Sprintf(format, args...)}
}

// SQS's own errors (shape name, query code).
func errNoQueue(name string) *apiError {
	return &apiError{Status: 400, Shape: "QueueDoesNotExist", Code: "AWS.SimpleQueueService.NonExistentQueue",
		Message: "The specified queue does not exist."}
}

func errInvalid(format string, args ...any) *apiError {
	return errorf(400, "InvalidParameterValue", format, args...)
}

func errMissing(param string) *apiError {
	return errorf(400, "MissingParameter", "The request must contain the parameter %s.", param)
}

func errAttrName(name string) *apiError {
	return errorf(400, "InvalidAttributeName", "Unknown Attribute %s.", name)
}

func errAttrValue(format string, args ...any) *apiError {
	return errorf(400, "InvalidAttributeValue", format, args...)
}

func errBatch(shape, format string, args ...any) *apiError {
	return &apiError{Status: 400, Shape: shape, Code: "AWS.SimpleQueueService." + shape, Message: fmt.Sprintf(format, args...)}
}

func errUnsupported(action string) *apiError {
	return &apiError{Status: 400, Shape: "UnsupportedOperation", Code: "AWS.SimpleQueueService.UnsupportedOperation",
		Message: fmt.Sprintf("The action %s is not supported by lmq-gateway.", action)}
}

func errReceipt(h string) *apiError {
	return &apiError{Status: 400, Shape: "ReceiptHandleIsInvalid", Code: "ReceiptHandleIsInvalid",
		Message: fmt.Sprintf("The input receipt handle %q is not a valid receipt handle.", h)}
}

func errNotInflight() *apiError {
	return &apiError{Status: 400, Shape: "MessageNotInflight", Code: "AWS.SimpleQueueService.MessageNotInflight",
		Message: "The message referred to is not in flight (its receipt handle expired, or it was deleted)."}
}

// apiErrorOf maps err, from the core or a handler, onto SQS's errors: an
// apiError as it is, the core's errors by their kind (gateway.KindOf, where
// their precedence is decided).
func apiErrorOf(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch gateway.KindOf(err) {
	case gateway.KindNotFound, gateway.KindInvalid, gateway.KindHeaderTooLarge:
		return errInvalid("%v", err)
	case gateway.KindTooLarge:
		return errInvalid("Message must be shorter than the queue's MaximumMessageSize: %v", err)
	case gateway.KindTooManyQueues:
		return &apiError{Status: 403, Shape: "OverLimit", Code: "OverLimit", Message: err.Error()}
	case gateway.KindUnavailable:
		return errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "%v", err)
	case gateway.KindUnknown:
		return errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "the outcome is unknown (it may have taken effect): %v", err)
	case gateway.KindCanceled:
		// Not the client's context (ServeHTTP answers nobody when the
		// client went away): the gateway is stopping, or a bound of its own
		// ran out. Nothing failed that a retry would not get past.
		return errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "the request was cut short: %v", err)
	}
	return errorf(http.StatusInternalServerError, "InternalFailure", "%v", err)
}
