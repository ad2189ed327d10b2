package sqs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestAPIErrorOfAnswers pins SQS's answer for each of the core's errors,
// alone and wrapped twice: status, query code, JSON shape and message ("%s"
// stands for the error's text).
func TestAPIErrorOfAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err         error
		status      int
		code, shape string
		msg         string
	}{
		{gateway.ErrInvalid, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		{gateway.ErrNotFound, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		{gateway.ErrAlreadyAcked, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		// Invalid names and properties alone are the client's fault too
		// (gateway.KindOf; were 500 InternalFailure).
		{mapping.ErrInvalidName, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		{mapping.ErrInvalidProps, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		{gateway.ErrHeaderTooLarge, 400, "InvalidParameterValue", "InvalidParameterValue", "%s"},
		{gateway.ErrTooLarge, 400, "InvalidParameterValue", "InvalidParameterValue", "Message must be shorter than the queue's MaximumMessageSize: %s"},
		{gateway.ErrTooManyQueues, 403, "OverLimit", "OverLimit", "%s"},
		{store.Classify("create queue", gateway.ErrTooManyQueues), 403, "OverLimit", "OverLimit", "%s"},
		{gateway.ErrUnavailable, 503, "ServiceUnavailable", "ServiceUnavailable", "%s"},
		{fmt.Errorf("%w (limit 3); try again", gateway.ErrBusy), 503, "ServiceUnavailable", "ServiceUnavailable", "%s"},
		{gateway.ErrUnknown, 503, "ServiceUnavailable", "ServiceUnavailable", "the outcome is unknown (it may have taken effect): %s"},
		{fmt.Errorf("%w: %w", gateway.ErrUnavailable, gateway.ErrUnknown), 503, "ServiceUnavailable", "ServiceUnavailable", "the outcome is unknown (it may have taken effect): %s"},
		{store.Outcome("store message", context.DeadlineExceeded), 503, "ServiceUnavailable", "ServiceUnavailable", "the outcome is unknown (it may have taken effect): %s"},
		{context.Canceled, 503, "ServiceUnavailable", "ServiceUnavailable", "the request was cut short: %s"},
		{context.DeadlineExceeded, 503, "ServiceUnavailable", "ServiceUnavailable", "the request was cut short: %s"},
		{errors.New("something else"), 500, "InternalFailure", "InternalFailure", "%s"},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("b: %w", fmt.Errorf("a: %w", tc.err))} {
			e := apiErrorOf(err)
			msg := fmt.Sprintf(tc.msg, err)
			if e.Status != tc.status || e.Code != tc.code || e.Shape != tc.shape || e.Message != msg {
				t.Errorf("apiErrorOf(%q) = %d %s %s %q, want %d %s %s %q", err, e.Status, e.Code, e.Shape, e.Message,
					tc.status, tc.code, tc.shape, msg)
			}
		}
	}
	own := errNoQueue("q")
	if e := apiErrorOf(fmt.Errorf("get queue url: %w", own)); e != own {
		t.Errorf("apiErrorOf(wrapped apiError) = %+v, want it as it is", e)
	}
}
