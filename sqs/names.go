package sqs

import (
	"net/url"
	"strings"
)

// maxQueueName is SQS's longest queue name, ".fifo" included.
const maxQueueName = 80

// validQueueName reports whether name is a queue name SQS accepts: 1 to 80
// of [A-Za-z0-9_-], ".fifo" at the end for FIFO queues. Names LMQ accepts
// beyond these exist but SQS cannot address them (ListQueues leaves them
// out).
func validQueueName(name string) bool {
	if name == "" || len(name) > maxQueueName {
		return false
	}
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" {
		return false
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isFIFOName(name string) bool { return strings.HasSuffix(name, ".fifo") }

// queueURL is the URL of queue as a client that reached the gateway at host
// (the request's Host) addresses it.
func (s *Server) queueURL(scheme, host, queue string) string {
	return scheme + "://" + host + "/" + s.opts.Account + "/" + queue
}

// queueARN is queue's ARN.
func (s *Server) queueARN(queue string) string {
	return "arn:aws:sqs:" + s.opts.Region + ":" + s.opts.Account + ":" + queue
}

// nameOfURL reads the queue name back from a QueueUrl of any host; the
// account must be this gateway's. A bare queue name is accepted too, as
// SQS does.
func (s *Server) nameOfURL(raw string) (string, *apiError) {
	if raw == "" {
		return "", errMissing("QueueUrl")
	}
	path := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", errorf(400, "InvalidAddress", "The address %s is not valid for this endpoint.", raw)
		}
		path = u.Path
	}
	path = strings.TrimPrefix(path, "/")
	account, name, ok := strings.Cut(path, "/")
	if !ok {
		account, name = s.opts.Account, path
	}
	if account != s.opts.Account || !validQueueName(name) {
		return "", errorf(400, "InvalidAddress", "The address %s is not valid for this endpoint.", raw)
	}
	return name, nil
}

// nameOfARN reads the queue name from an ARN of this account (any region).
func (s *Server) nameOfARN(arn string) (string, bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[4] != s.opts.Account || !validQueueName(parts[5]) {
		return "", false
	}
	return parts[5], true
}
