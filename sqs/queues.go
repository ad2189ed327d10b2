package sqs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// SQS's defaults and bounds of queue attributes.
const (
	defaultRetention  = 345600 // 4 days
	defaultMaxMessage = 262144
	maxMessageSize    = 1 << 20
	maxWaitSeconds    = 20
	maxDelaySeconds   = 900
	maxVisibility     = 43200
)

// Attributes kept in the queue's metadata (QueueMeta.Attrs): those LMQ has
// no property for.
var metaAttrs = []string{"DelaySeconds", "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize", "RedrivePolicy",
	"RedriveAllowPolicy", "Policy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
	"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}

// exists reports whether queue exists.
func (s *Server) exists(ctx context.Context, queue string) (bool, error) {
	return s.core.Queues.QueueExists(ctx, queue)
}

// mustExist is the QueueDoesNotExist error when queue does not exist.
func (s *Server) mustExist(ctx context.Context, queue string) error {
	ok, err := s.exists(ctx, queue)
	if err != nil {
		return err
	}
	if !ok {
		return errNoQueue(queue)
	}
	return nil
}

type queueURLOut struct {
	QueueURL string `json:"QueueUrl" xml:"QueueUrl"`
}

// redrive is a RedrivePolicy.
type redrive struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     any    `json:"maxReceiveCount"` // a number or a string
}

// checkAttrs validates queue attributes to set on queue: the properties
// they change and the metadata attributes, SQS's spelling.
func (s *Server) checkAttrs(r *request, queue string, attrs map[string]string, creating bool) (mapping.Props, map[string]string, error) {
	var p mapping.Props
	meta := make(map[string]string)
	fifo := isFIFOName(queue)
	intIn := func(name, v string, lo, hi int) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, errAttrValue("Invalid value for the parameter %s: must be an integer from %d to %d.", name, lo, hi)
		}
		return n, nil
	}
	for name, v := range attrs {
		switch name {
		case "VisibilityTimeout":
			n, err := intIn(name, v, 0, maxVisibility)
			if err != nil {
				return p, nil, err
			}
			f := float64(n)
			p.Timeout = &f
		case "MessageRetentionPeriod":
			n, err := intIn(name, v, 60, 1209600)
			if err != nil {
				return p, nil, err
			}
			f := float64(n)
			p.TTL = &f
		case "DelaySeconds", "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize", "KmsDataKeyReusePeriodSeconds":
			bounds := map[string][2]int{"DelaySeconds": {0, maxDelaySeconds}, "ReceiveMessageWaitTimeSeconds": {0, maxWaitSeconds},
				"MaximumMessageSize": {1024, maxMessageSize}, "KmsDataKeyReusePeriodSeconds": {60, 86400}}[name]
			lo, hi := bounds[0], bounds[1]
			n, err := intIn(name, v, lo, hi)
			if err != nil {
				return p, nil, err
			}
			meta[name] = strconv.Itoa(n)
		case "RedrivePolicy":
			if v == "" {
				meta[name] = ""
				retry := mapping.MaxRetry
				no, none := false, ""
				p.Retry, p.DeadLetter, p.DeadLetterQueue = &retry, &no, &none
				continue
			}
			var rp redrive
			if err := json.Unmarshal([]byte(v), &rp); err != nil {
				return p, nil, errAttrValue("Invalid value for the parameter RedrivePolicy: %v", err)
			}
			n, err := strconv.Atoi(strings.Trim(fmt.Sprint(rp.MaxReceiveCount), `"`))
			if err != nil || n < 1 || n > 1000 {
				return p, nil, errAttrValue("Value %s for parameter RedrivePolicy is invalid. Reason: maxReceiveCount must be an integer from 1 to 1000.", v)
			}
			dlq, ok := s.nameOfARN(rp.DeadLetterTargetArn)
			if ok {
				// The token's scope before the target's existence: a
				// target outside it is refused the same whether it
				// exists or not, so that the answer tells nothing of
				// other namespaces' queues. The core would push into it
				// (as PATCH /properties refuses a dead_letter_queue
				// outside the token's queues).
				if !r.inScope(dlq) {
					t := r.prin.Token()
					return p, nil, errorf(http.StatusForbidden, "AccessDenied", "token %q may not use queue %q as a dead-letter queue", t.Name(), dlq)
				}
				if ok, err = s.exists(r.ctx, dlq); err != nil {
					return p, nil, err
				}
			}
			if !ok {
				return p, nil, errAttrValue("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter target does not exist.", v)
			}
			if isFIFOName(dlq) != fifo {
				return p, nil, errAttrValue("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter queue of a FIFO queue must be FIFO, of a standard queue standard.", v)
			}
			// maxReceiveCount receives in all: retry+1 deliveries; then the
			// core moves the message to the target queue (the property
			// dead_letter_queue), or keeps it in this queue's dead letters
			// should that move fail.
			retry := n - 1
			yes := true
			p.Retry, p.DeadLetter, p.DeadLetterQueue = &retry, &yes, &dlq
			b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": rp.DeadLetterTargetArn, "maxReceiveCount": n})
			meta[name] = string(b)
		case "RedriveAllowPolicy", "Policy", "KmsMasterKeyId":
			if name != "KmsMasterKeyId" && v != "" && !json.Valid([]byte(v)) {
				return p, nil, errAttrValue("Invalid value for the parameter %s: not JSON.", name)
			}
			meta[name] = v
		case "SqsManagedSseEnabled":
			if v != "true" && v != "false" {
				return p, nil, errAttrValue("Invalid value for the parameter %s: true or false.", name)
			}
			meta[name] = v
		case "FifoQueue":
			if v != "true" && v != "false" {
				return p, nil, errAttrValue("Invalid value for the parameter FifoQueue.")
			}
			if !creating {
				return p, nil, errAttrName(name)
			}
			if (v == "true") != fifo {
				return p, nil, errAttrValue("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length; FifoQueue must be true exactly for such names.")
			}
			if fifo {
				meta[name] = v
			}
		case "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit":
			if !fifo {
				return p, nil, errAttrName(name)
			}
			ok := map[string][]string{"ContentBasedDeduplication": {"true", "false"}, "DeduplicationScope": {"messageGroup", "queue"},
				"FifoThroughputLimit": {"perQueue", "perMessageGroupId"}}[name]
			if v != ok[0] && v != ok[1] {
				return p, nil, errAttrValue("Invalid value for the parameter %s: %s or %s.", name, ok[0], ok[1])
			}
			meta[name] = v
		default:
			return p, nil, errAttrName(name)
		}
	}
	if creating && fifo && attrs["FifoQueue"] != "true" {
		return p, nil, errAttrValue("The attribute FifoQueue must be true for a queue whose name ends in .fifo.")
	}
	return p, meta, nil
}

func (s *Server) createQueue(r *request) (any, error) {
	name := r.QueueName
	if name == "" {
		return nil, errMissing("QueueName")
	}
	if !validQueueName(name) {
		return nil, errInvalid("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length (FIFO queues: ending in .fifo).")
	}
	patch, meta, err := s.checkAttrs(r, name, r.Attributes, true)
	if err != nil {
		return nil, err
	}
	tags := r.CreateTags
	if len(tags) == 0 {
		tags = r.Tags
	}
	out := queueURLOut{s.queueURL(r.scheme, r.host, name)}
	exists, err := s.exists(r.ctx, name)
	if err != nil {
		return nil, err
	}
	if exists {
		// SQS: an existing queue is answered as created when the request
		// asks for the attributes it has, else QueueNameExists.
		cur, err := s.attributes(r, name)
		if err != nil {
			return nil, err
		}
		for k, v := range r.Attributes {
			if c, ok := cur[k]; ok && c != v && !(k == "RedrivePolicy" && meta[k] == c) {
				return nil, &apiError{Status: 400, Shape: "QueueNameExists", Code: "QueueAlreadyExists",
					Message: fmt.Sprintf("A queue already exists with the same name and a different value for attribute %s", k)}
			}
		}
		return out, nil
	}
	if patch.Retry == nil {
		// SQS redelivers without limit unless a redrive policy says
		// otherwise; LMQ's default is 2 retries.
		retry := mapping.MaxRetry
		patch.Retry = &retry
	}
	if patch.TTL == nil {
		ttl := float64(defaultRetention)
		patch.TTL = &ttl
	}
	if _, err := s.core.Queues.CreateQueue(r.ctx, name); err != nil {
		return nil, err
	}
	if err := s.core.Queues.UpdateProps(r.ctx, name, patch); err != nil {
		return nil, err
	}
	now := s.now()
	err = s.core.Queues.UpdateQueueMeta(r.ctx, name, func(m *QueueMeta) {
		if m.Created.IsZero() {
			m.Created = now
		}
		m.Modified = now
		if m.Attrs == nil {
			m.Attrs = make(map[string]string)
		}
		maps.Copy(m.Attrs, meta)
		if len(tags) > 0 {
			if m.Tags == nil {
				m.Tags = make(map[string]string)
			}
			maps.Copy(m.Tags, tags)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) getQueueURL(r *request) (any, error) {
	if r.QueueName == "" {
		return nil, errMissing("QueueName")
	}
	if !validQueueName(r.QueueName) {
		return nil, errNoQueue(r.QueueName)
	}
	if err := s.mustExist(r.ctx, r.QueueName); err != nil {
		return nil, err
	}
	return queueURLOut{s.queueURL(r.scheme, r.host, r.QueueName)}, nil
}

type listQueuesOut struct {
	QueueUrls []string `json:"QueueUrls,omitempty" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

// deadSourcesOut is ListDeadLetterSourceQueues' answer: SQS's JSON spells
// its list "queueUrls", lowercase, unlike ListQueues' (the SDKs read it so).
type deadSourcesOut struct {
	QueueUrls []string `json:"queueUrls" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

func (s *Server) listQueues(r *request) (any, error) {
	limit := 1000
	paged := r.MaxResults != nil
	if paged {
		if *r.MaxResults < 1 || *r.MaxResults > 1000 {
			return nil, errInvalid("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and 1000.", *r.MaxResults)
		}
		limit = *r.MaxResults
	}
	after := ""
	if r.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(r.NextToken)
		if err != nil {
			return nil, errInvalid("Invalid NextToken value.")
		}
		after = string(b)
	}
	var out listQueuesOut
	for _, name := range s.core.Queues.QueueNames() {
		if !validQueueName(name) || !strings.HasPrefix(name, r.QueueNamePrefix) || (after != "" && name <= after) {
			continue
		}
		if !r.inScope(name) {
			continue
		}
		if len(out.QueueUrls) == limit {
			if paged {
				last := out.QueueUrls[len(out.QueueUrls)-1]
				out.NextToken = base64.RawURLEncoding.EncodeToString([]byte(last[strings.LastIndexByte(last, '/')+1:]))
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, s.queueURL(r.scheme, r.host, name))
	}
	return out, nil
}

func (s *Server) deleteQueue(r *request) (any, error) {
	if err := s.core.Queues.DeleteQueue(r.ctx, r.queue); err != nil {
		if isNotFound(err) {
			return nil, errNoQueue(r.queue)
		}
		return nil, err
	}
	return nil, nil
}

func (s *Server) purgeQueue(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	if err := s.core.Queues.Purge(r.ctx, r.queue); err != nil {
		if isNotFound(err) {
			return nil, errNoQueue(r.queue)
		}
		return nil, err
	}
	return nil, nil
}

// attributes are every attribute of queue, as GetQueueAttributes "All".
func (s *Server) attributes(r *request, queue string) (map[string]string, error) {
	d, err := s.core.Inspect.QueueDetail(r.ctx, queue)
	if err != nil {
		if isNotFound(err) {
			return nil, errNoQueue(queue)
		}
		return nil, err
	}
	meta, err := s.core.Queues.QueueMeta(r.ctx, queue)
	if err != nil {
		return nil, err
	}
	eff := d.Props
	visible := d.Size - min(d.Size, d.InFlight)
	ttl := int64(eff.TTL)
	if ttl == 0 {
		ttl = 1209600 // LMQ keeps messages without limit: SQS's longest
	}
	a := map[string]string{
		"QueueArn":                              s.queueARN(queue),
		"ApproximateNumberOfMessages":           strconv.FormatUint(visible, 10),
		"ApproximateNumberOfMessagesNotVisible": strconv.FormatUint(d.InFlight, 10),
		"ApproximateNumberOfMessagesDelayed":    strconv.FormatUint(d.Delayed, 10),
		"CreatedTimestamp":                      strconv.FormatInt(meta.Created.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(meta.Modified.Unix(), 10),
		"VisibilityTimeout":                     strconv.FormatInt(int64(eff.Timeout), 10),
		"MessageRetentionPeriod":                strconv.FormatInt(ttl, 10),
		"DelaySeconds":                          "0",
		"ReceiveMessageWaitTimeSeconds":         "0",
		"MaximumMessageSize":                    strconv.Itoa(defaultMaxMessage),
		"SqsManagedSseEnabled":                  "false",
	}
	if meta.Created.IsZero() {
		a["CreatedTimestamp"], a["LastModifiedTimestamp"] = "0", "0"
	}
	if isFIFOName(queue) {
		a["FifoQueue"] = "true"
		a["ContentBasedDeduplication"] = "false"
		a["DeduplicationScope"] = "queue"
		a["FifoThroughputLimit"] = "perQueue"
	}
	for k, v := range meta.Attrs {
		if v == "" {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	return a, nil
}

type attributesOut struct {
	Attributes attrMap `json:"Attributes,omitempty" xml:"Attribute"`
}

func (s *Server) getQueueAttributes(r *request) (any, error) {
	all, err := s.attributes(r, r.queue)
	if err != nil {
		return nil, err
	}
	out := attributesOut{Attributes: attrMap{}}
	for _, n := range r.AttributeNames {
		if n == "All" {
			out.Attributes = all
			break
		}
		if v, ok := all[n]; ok {
			out.Attributes[n] = v
		} else if !knownQueueAttr(n) {
			return nil, errAttrName(n)
		}
	}
	return out, nil
}

// knownQueueAttr reports whether n is an attribute SQS has (some are absent
// from a given queue: FIFO's on a standard one).
func knownQueueAttr(n string) bool {
	switch n {
	case "QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
		"CreatedTimestamp", "LastModifiedTimestamp", "VisibilityTimeout", "MessageRetentionPeriod", "Policy":
		return true
	}
	for _, m := range metaAttrs {
		if m == n {
			return true
		}
	}
	return false
}

func (s *Server) setQueueAttributes(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	patch, meta, err := s.checkAttrs(r, r.queue, r.Attributes, false)
	if err != nil {
		return nil, err
	}
	if !patch.IsZero() {
		if err := s.core.Queues.UpdateProps(r.ctx, r.queue, patch); err != nil {
			return nil, err
		}
	}
	now := s.now()
	return nil, s.core.Queues.UpdateQueueMeta(r.ctx, r.queue, func(m *QueueMeta) {
		m.Modified = now
		if m.Attrs == nil {
			m.Attrs = make(map[string]string)
		}
		maps.Copy(m.Attrs, meta)
	})
}

func (s *Server) listDeadLetterSourceQueues(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	arn := s.queueARN(r.queue)
	out := deadSourcesOut{QueueUrls: []string{}}
	for _, name := range s.core.Queues.QueueNames() {
		// Only the token's queues: a source outside them is another
		// namespace's, whose name the token must not learn.
		if !validQueueName(name) || !r.inScope(name) {
			continue
		}
		m, err := s.core.Queues.QueueMeta(r.ctx, name)
		if err != nil || m.Attrs["RedrivePolicy"] == "" {
			continue
		}
		var rp redrive
		if json.Unmarshal([]byte(m.Attrs["RedrivePolicy"]), &rp) == nil {
			if q, ok := s.nameOfARN(rp.DeadLetterTargetArn); ok && s.queueARN(q) == arn {
				out.QueueUrls = append(out.QueueUrls, s.queueURL(r.scheme, r.host, name))
			}
		}
	}
	return out, nil
}

func (s *Server) tagQueue(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	if len(r.Tags) == 0 {
		return nil, errMissing("Tags")
	}
	return nil, s.core.Queues.UpdateQueueMeta(r.ctx, r.queue, func(m *QueueMeta) {
		if m.Tags == nil {
			m.Tags = make(map[string]string)
		}
		maps.Copy(m.Tags, r.Tags)
	})
}

func (s *Server) untagQueue(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	return nil, s.core.Queues.UpdateQueueMeta(r.ctx, r.queue, func(m *QueueMeta) {
		for _, k := range r.TagKeys {
			delete(m.Tags, k)
		}
	})
}

type tagsOut struct {
	Tags tagMap `json:"Tags,omitempty" xml:"Tag"`
}

func (s *Server) listQueueTags(r *request) (any, error) {
	if err := s.mustExist(r.ctx, r.queue); err != nil {
		return nil, err
	}
	m, err := s.core.Queues.QueueMeta(r.ctx, r.queue)
	if err != nil {
		return nil, err
	}
	return tagsOut{Tags: m.Tags}, nil
}

// inScope reports whether the request may see or name queue: always
// without authentication and for the operator, else when queue is in the
// token's queues. Every look-up of a second queue (a redrive target, a
// dead-letter source, a listing) asks it before the queue's existence, so
// that no answer tells a token about queues outside its scope.
func (r *request) inScope(queue string) bool {
	if r.prin == nil || r.prin.Token() == nil {
		return true
	}
	return r.prin.Token().InScope(queue)
}
