package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// The upgrade lock: one gateway upgrades at a time. The lock is a key in the
// properties bucket (the properties cache ignores keys it does not know),
// written with revision checks and renewed every few seconds, with the
// holder's id. A holder that died is noticed at once (nobody answers on its
// liveness subject) or when its lease runs out.
const (
	// lockKey is the key in mapping.PropsBucket held by the gateway that
	// upgrades.
	lockKey = "upgrade.lock"
	// lease is how long the lock stays with a holder that stopped renewing
	// it but still answers on its liveness subject.
	lease = 30 * time.Second
	// lockPoll is how often a waiting gateway looks at the lock.
	lockPoll = 500 * time.Millisecond
)

// lockValue is the lock key's value.
type lockValue struct {
	Owner   string `json:"owner"`
	Expires int64  `json:"expires"` // Unix ns
}

// aliveSubject is where the lock's holder answers while it runs; the same
// subject as older versions', which ran the upgrade inside the core, so
// that gateways of both wait for each other.
func aliveSubject(id string) string { return "lmq.gw." + id + ".upgrade" }

// lock takes the upgrade lock, waiting while a live gateway holds it. The
// returned context ends when the lock is lost (the upgrade must stop) or
// unlock is called; unlock releases the lock.
func (u *upgrader) lock(ctx context.Context) (context.Context, func(), error) {
	id := u.core.Gateway.ID()
	sub, err := u.nc.Subscribe(aliveSubject(id), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe upgrade liveness: %w", err)
	}
	mine := func() []byte {
		b, _ := json.Marshal(lockValue{Owner: id, Expires: time.Now().Add(lease).UnixNano()})
		return b
	}
	var rev uint64
	waiting := false
	for rev == 0 {
		e, err := u.kv.Get(ctx, lockKey)
		switch {
		case errors.Is(err, kv.ErrKeyNotFound):
			rev, err = u.kv.Create(ctx, lockKey, mine())
		case err == nil:
			var v lockValue
			// v.Owner == id: an earlier attempt of this gateway left it (one
			// that failed before its unlock took effect); it answers as alive
			// on this very subscription, so waiting would last the lease.
			if json.Unmarshal(e.Value, &v) != nil || v.Owner == id || time.Now().UnixNano() > v.Expires || !u.holderAlive(ctx, v.Owner) {
				rev, err = u.kv.Update(ctx, lockKey, mine(), e.Revision)
			} else if !waiting {
				waiting = true
				u.log.Info("waiting for another gateway to finish upgrading the queues", "gateway", v.Owner)
			}
		}
		if err != nil && !errors.Is(err, kv.ErrKeyExists) && !errors.Is(err, kv.ErrRevisionMismatch) {
			_ = sub.Unsubscribe()
			return nil, nil, fmt.Errorf("upgrade lock: %w", err)
		}
		if rev != 0 {
			break
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = sub.Unsubscribe()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(lease / 6)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			uctx, ucancel := context.WithTimeout(lctx, opTimeout)
			r, err := u.kv.Update(uctx, lockKey, mine(), rev)
			ucancel()
			if errors.Is(err, kv.ErrRevisionMismatch) || errors.Is(err, kv.ErrKeyNotFound) {
				cancel(errors.New("upgrade lock lost to another gateway"))
				return
			}
			if err == nil {
				rev = r
			}
			// Other errors: try again at the next tick; the lease is
			// several ticks long.
		}
	}()
	unlock := func() {
		cancel(nil)
		<-done
		dctx, dcancel := context.WithTimeout(context.Background(), opTimeout)
		defer dcancel()
		_ = u.kv.Delete(dctx, lockKey, kv.LastRevision(rev))
		_ = sub.Unsubscribe()
	}
	return lctx, unlock, nil
}

// holderAlive reports whether the gateway holding the lock still runs. Only
// "no responders" counts as dead.
func (u *upgrader) holderAlive(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := u.nc.RequestWithContext(ctx, aliveSubject(id), nil)
	return !errors.Is(err, nats.ErrNoResponders)
}
