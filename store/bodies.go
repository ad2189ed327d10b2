package store

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
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Large bodies: a body too large for one NATS message lives in the Object
// Store bucket mapping.ObjectBucket, and the queued message carries its
// name (mapping.HdrObject). A body is removed when no stored message refers
// to it any more: one certainly not stored, or removed for good.

// objectStore opens (creating on first use) the large-body bucket.
func (s *Store) objectStore(ctx context.Context) (jetstream.ObjectStore, error) {
	s.objMu.Lock()
	defer s.objMu.Unlock()
	if s.obj != nil {
		return s.obj, nil
	}
	obj, err := s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      mapping.ObjectBucket,
		Description: "lmq-gateway bodies too large for one NATS message",
		Replicas:    s.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	s.obj = obj
	return obj, nil
}

// readError marks an error of the reader PutBody was given, to tell it from
// JetStream's.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// PutBody streams prefix and then r into the Object Store as a new body of
// queue and returns its name (for Content.Object) and size. On failure
// nothing is kept. An error of r comes back as it is (wrapped); JetStream's
// are classified (Classify) and recorded (Failure).
func (h Bodies) PutBody(ctx context.Context, queue string, prefix []byte, r io.Reader) (name string, size int64, err error) {
	s := h.s
	if err := s.health.precheck("store large message"); err != nil {
		return "", 0, err
	}
	// The bucket must exist; putObject publishes into its stream.
	if _, err := s.objectStore(ctx); err != nil {
		return "", 0, Classify("store large message", err)
	}
	name = mapping.EncodeName(queue) + "/" + uuid.NewString()
	size, err = s.putObject(ctx, name, io.MultiReader(bytes.NewReader(prefix), r))
	if err != nil {
		// putObject purges the chunks it stored when it fails; the delete
		// also removes a meta entry left by an error after the last chunk.
		s.Bodies().DeleteBody(ctx, name)
		var re readError
		if errors.As(err, &re) {
			return "", 0, fmt.Errorf("reading body: %w", re.err)
		}
		s.health.note(err)
		return "", 0, Classify("store large message", err)
	}
	return name, size, nil
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

// putObject stores r as the object name of the large-body bucket and
// returns its size. An error of r comes back as a readError.
func (s *Store) putObject(ctx context.Context, name string, r io.Reader) (int64, error) {
	bucket := mapping.ObjectBucket
	chunkSize := int(min(int64(putChunk), max(s.InlineLimit(), 1)))
	nuid := strings.ReplaceAll(uuid.NewString(), "-", "")
	chunkSubj := jsapi.ObjectChunkSubject(bucket, nuid)
	purge := func() {
		pctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if st, err := s.js.Stream(pctx, jsapi.ObjectStream(bucket)); err == nil {
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
			f, err := s.js.PublishMsgAsync(m)
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
			return 0, readError{rerr}
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
		_, err = s.js.PublishMsg(ctx, meta)
	}
	if err != nil {
		purge()
		return 0, err
	}
	return total, nil
}

// BodySize is the size of the large body name; false when it cannot be
// read.
func (h Bodies) BodySize(ctx context.Context, name string) (int64, bool) {
	s := h.s
	obj, err := s.objectStore(ctx)
	if err != nil {
		return 0, false
	}
	info, err := obj.GetInfo(ctx, name)
	if err != nil || info.Size > 1<<62 {
		return 0, false
	}
	return int64(info.Size), true
}

// DropBody deletes the Object Store body m refers to, if any: for a message
// certainly not stored, or removed for good.
func (h Bodies) DropBody(ctx context.Context, m *bus.Msg) {
	s := h.s
	if ref := m.Header.Get(mapping.HdrObject); ref != "" {
		s.Bodies().DeleteBody(ctx, ref)
	}
}

// DeleteBody removes an Object Store body that no message refers to (one
// already gone is fine). A clean-up is worth finishing when the request that
// asked for it has ended, so it runs on its own deadline.
func (h Bodies) DeleteBody(ctx context.Context, name string) {
	s := h.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	obj, err := s.objectStore(ctx)
	if err == nil {
		err = obj.Delete(ctx, name)
	}
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Warn("could not delete large-message body", "object", name, "err", err)
	}
}

// DeleteQueueBodies removes the large bodies of a deleted queue.
func (h Bodies) DeleteQueueBodies(ctx context.Context, queue string) {
	s := h.s
	s.objMu.Lock()
	obj := s.obj
	s.objMu.Unlock()
	if obj == nil {
		if _, err := s.js.ObjectStore(ctx, mapping.ObjectBucket); err != nil {
			return // no large bodies were ever stored
		}
		var err error
		if obj, err = s.objectStore(ctx); err != nil {
			return
		}
	}
	list, err := obj.List(ctx)
	if err != nil {
		return
	}
	// Bodies stored before the upgrade from the one-stream-per-queue layout
	// keep that layout's name (hashed for long queue names).
	prefix, legacy := mapping.EncodeName(queue)+"/", mapping.LegacyEncodeName(queue)+"/"
	for _, info := range list {
		if strings.HasPrefix(info.Name, prefix) || strings.HasPrefix(info.Name, legacy) {
			_ = obj.Delete(ctx, info.Name)
		}
	}
}
