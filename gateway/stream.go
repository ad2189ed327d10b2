package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// DefaultMaxBufferedBody is Config.MaxBufferedBody's default: four times the
// embedded server's default NATS payload limit (8 MiB).
const DefaultMaxBufferedBody = 32 << 20

// storedBody is a body the push path already wrote to the Object Store: the
// message carries only the reference (encodeMessage).
type storedBody struct {
	name string
	size int64
}

// size is the body's length, also when it is in the Object Store already.
func (m Message) size() int {
	if m.stored != nil {
		return int(m.stored.size)
	}
	return len(m.Body)
}

// inlineLimit is the largest body stored inside the queue's NATS message;
// larger ones go to the Object Store.
func (g *Gateway) inlineLimit() int64 {
	return max(g.nc.MaxPayload()-headerRoom, 0)
}

// PushStream is PushWith for a body read from body (msg.Body is ignored): a
// front end hands over the request body unread, so that the core's memory
// for one push stays near the NATS payload limit whatever the body's size.
// It reads up to the inline limit; a body that ends there is pushed as
// usual. A longer one is streamed into the Object Store (enforcing
// MaxMessageSize as it goes: beyond it, ErrTooLarge and nothing is kept) and
// the queued message refers to it. Pushes to accumulating queues hold the
// body in memory (their parts are kept together), bounded by
// Config.MaxBufferedBody.
//
// Errors of body itself come back wrapped (errors.As finds them) inside
// ErrInvalid, or ErrTooLarge for the core's own limit.
func (g *Gateway) PushStream(ctx context.Context, queue string, msg Message, body io.Reader, opts PushOptions) (AccumState, error) {
	if err := validName(queue); err != nil {
		return "", err
	}
	if err := CheckHeaders(msg); err != nil {
		return "", err
	}
	br := &bodyReader{r: body, max: g.cfg.MaxMessageSize}
	limit := g.inlineLimit()
	if _, err := g.queues.ensure(ctx, queue); err != nil {
		return "", err
	}
	if g.props.effective(queue).Accum > 0 {
		limit = min(g.cfg.MaxBufferedBody, g.cfg.MaxMessageSize)
		br.max = limit
	}
	prefix, err := io.ReadAll(io.LimitReader(br, limit+1))
	if err != nil {
		return "", br.fail(err)
	}
	if int64(len(prefix)) <= limit {
		msg.Body = prefix
		return g.PushWith(ctx, queue, msg, opts)
	}
	if err := g.store.precheck("store large message"); err != nil {
		return "", err
	}
	// The bucket must exist; putObject publishes into its stream.
	if _, err := g.objectStore(ctx); err != nil {
		return "", jsErr("store large message", err)
	}
	name := mapping.EncodeName(queue) + "/" + uuid.NewString()
	size, err := g.putObject(ctx, name, io.MultiReader(bytes.NewReader(prefix), br))
	prefix = nil
	if err != nil {
		// putObject purges the chunks it stored when it fails; the delete
		// also removes a meta entry left by an error after the last chunk.
		g.deleteObject(ctx, name)
		if br.err != nil {
			return "", br.fail(br.err)
		}
		g.store.note(err)
		return "", jsErr("store large message", err)
	}
	msg.Body, msg.stored = nil, &storedBody{name: name, size: size}
	st, err := g.PushWith(ctx, queue, msg, opts)
	if err != nil {
		// PushWith drops the object itself when the publish fails, but not
		// when it refuses the push before (bad options, the queue turned
		// accumulating meanwhile). When the outcome is unknown the message
		// may be stored and refer to the object: it stays.
		if !errors.Is(err, ErrUnknown) {
			g.deleteObject(ctx, name)
		}
		return "", err
	}
	return st, nil
}

// errBodyTooLarge is bodyReader's error beyond its limit.
var errBodyTooLarge = errors.New("body too large")

// bodyReader reads a pushed body, counting it against max and remembering
// the reader's own error (to tell it from JetStream's).
type bodyReader struct {
	r   io.Reader
	max int64
	n   int64
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.max + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.err = errBodyTooLarge
		return n, b.err
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// fail classifies an error met while reading the body.
func (b *bodyReader) fail(err error) error {
	if errors.Is(err, errBodyTooLarge) {
		return fmt.Errorf("%w: the body is larger than %d bytes", ErrTooLarge, b.max)
	}
	return fmt.Errorf("%w: reading body: %w", ErrInvalid, err)
}

// Object Store writing with flow control. nats.go's ObjectStore.Put
// publishes chunks asynchronously with thousands allowed in flight: reading
// from a fast client, the body then piles up in the connection and in the
// stream's inbound queue (in this process with the embedded server), about
// as large as the body. putObject writes the same objects (the Object Store
// layout, jsapi.ObjectChunkSubject and ObjectMetaSubject: chunks, then the
// object's description rolling up earlier ones) with at most
// putWindow chunks unacknowledged, so that memory per upload stays near
// putWindow chunks whatever the body's size.
const (
	putChunk  = 128 << 10
	putWindow = 4
)

// putObject stores r as the object name of bucket obj and returns its size.
func (g *Gateway) putObject(ctx context.Context, name string, r io.Reader) (int64, error) {
	bucket := mapping.ObjectBucket
	chunkSize := int(min(int64(putChunk), max(g.inlineLimit(), 1)))
	nuid := strings.ReplaceAll(uuid.NewString(), "-", "")
	chunkSubj := jsapi.ObjectChunkSubject(bucket, nuid)
	purge := func() {
		pctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if st, err := g.js.Stream(pctx, jsapi.ObjectStream(bucket)); err == nil {
			_ = st.Purge(pctx, jetstream.WithPurgeSubject(chunkSubj))
		}
	}
	var (
		inFlight []jetstream.PubAckFuture
		h        = sha256.New()
		total    int64
		chunks   uint32
	)
	wait := func(f jetstream.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		buf := make([]byte, chunkSize)
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if len(inFlight) == putWindow {
				if err := wait(inFlight[0]); err != nil {
					purge()
					return 0, err
				}
				inFlight = inFlight[1:]
			}
			h.Write(buf[:n])
			m := nats.NewMsg(chunkSubj)
			m.Data = buf[:n]
			f, err := g.js.PublishMsgAsync(m)
			if err != nil {
				purge()
				return 0, err
			}
			inFlight = append(inFlight, f)
			total += int64(n)
			chunks++
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			purge()
			return 0, rerr
		}
	}
	for _, f := range inFlight {
		if err := wait(f); err != nil {
			purge()
			return 0, err
		}
	}
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: uint32(chunkSize)}},
		Bucket:     bucket,
		NUID:       nuid,
		Size:       uint64(total),
		ModTime:    time.Now().UTC(),
		Chunks:     chunks,
		Digest:     jetstream.GetObjectDigestValue(h),
	}
	meta := nats.NewMsg(jsapi.ObjectMetaSubject(bucket, name))
	meta.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	var err error
	if meta.Data, err = json.Marshal(info); err == nil {
		_, err = g.js.PublishMsg(ctx, meta)
	}
	if err != nil {
		purge()
		return 0, err
	}
	return total, nil
}
