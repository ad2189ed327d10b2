package embedded

import (
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lmq-gateway/lmq-gateway/internal/bytesize"
)

// JetStream's storage limit (max_file_store) decides when publishes are
// refused with "insufficient resources" rather than the disk filling. Left
// to itself, nats-server 2.15 computes it at every start as 75% of the
// file system's free space, adding back 75% of what the streams it
// recovered hold (server/disk_avail.go, finalizeDynamicMaxStore): with
// other files on the disk, or its own files larger than what it counts, a
// restart can leave the limit at or below what is already stored, and
// every write is then refused, also the ones that would free space (a
// queue's deletion is recorded in a KV bucket). Its start banner even
// prints the provisional figure ("Max Storage: 11.89 MB" for a store
// holding 48 MB).
//
// The embedded server therefore always gets an explicit limit:
// Options.MaxStore when set, else 75% of the file system's size, but no
// more than what the store holds plus 75% of the free space (a disk shared
// with other files). Either way never less than what the store holds at
// start plus storeHeadroom, so that a full store restarts able to record
// deletions. The limit is fixed for the life of the process: the store
// watchdog's in-place restarts of JetStream reuse it.

// storeShare is the part of the file system (and of its free space) the
// default limit gives JetStream, nats-server's own 75%.
const (
	storeShareNum = 3
	storeShareDen = 4
)

// storeHeadroom is added to what the store holds at start when the limit
// would be below it: room for the small bookkeeping writes (registry and
// property tombstones, readiness probes) that deleting a queue needs.
const storeHeadroom = 1 << 20

// fsSpace is a file system's size and the space an unprivileged writer may
// still use, in bytes.
type fsSpace struct {
	total, free int64
}

// storePlan is the storage limit decided at start and why.
type storePlan struct {
	limit int64
	held  int64 // bytes of the store's files at start
	space fsSpace
	known bool // space was measured
	// warn holds what the operator should hear: a limit raised above the
	// one asked for, or one the disk cannot give.
	warn []string
}

// planStore decides the storage limit of a store holding held bytes on a
// file system with space (known false: not measured), asked for explicit
// bytes (0: the default).
func planStore(explicit, held int64, space fsSpace, known bool) storePlan {
	p := storePlan{held: held, space: space, known: known}
	floor := held + storeHeadroom
	switch {
	case explicit > 0:
		p.limit = explicit
		if explicit < floor {
			p.limit = floor
			p.warn = append(p.warn, fmt.Sprintf(
				"--max-store %s is below what the store already holds (%s): using %s instead, so that queues can still be deleted and purged; "+
					"delete or purge queues, and the limit asked for applies at a start once the store holds less",
				bytesize.Format(explicit), bytesize.Format(held), bytesize.Format(floor)))
		}
	case known:
		p.limit = min(space.total/storeShareDen*storeShareNum, held+space.free/storeShareDen*storeShareNum)
		p.limit = max(p.limit, floor)
	default:
		// Unmeasured: nats-server's own default, but no less than the
		// store holds.
		p.limit = 0
		return p
	}
	if known && p.limit > held+space.free {
		p.warn = append(p.warn, fmt.Sprintf(
			"the JetStream storage limit %s is more than the file system can give the store (it holds %s, %s free): the disk may fill before JetStream refuses writes; "+
				"writes then fail until space is freed (set --max-store to what the disk can hold)",
			bytesize.Format(p.limit), bytesize.Format(held), bytesize.Format(space.free)))
	}
	return p
}

// storeBytes is the size of the store's files under dir (the data
// directory: JetStream's are in dir/jetstream), 0 when there are none.
// Files it cannot read are skipped: the limit errs low by their size.
func storeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(filepath.Join(dir, server.JetStreamStoreDir), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable entry; a missing directory: none
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// storeLimit measures the store in dir and its file system and decides
// the limit (0: leave it to nats-server, the file system could not be
// measured), logging it, and warnings when it cannot be what was asked.
func storeLimit(dir string, explicit int64, log *slog.Logger) int64 {
	space, err := diskSpace(dir)
	p := planStore(explicit, storeBytes(dir), space, err == nil)
	if log == nil {
		return p.limit
	}
	for _, w := range p.warn {
		log.Warn(w, "data-dir", dir)
	}
	attrs := []any{"held", bytesize.Format(p.held)}
	if p.known {
		attrs = append(attrs, "fs-size", bytesize.Format(space.total), "fs-free", bytesize.Format(space.free))
	} else {
		attrs = append(attrs, "fs", fmt.Sprintf("not measured: %v", err))
	}
	switch {
	case p.limit == 0:
		log.Info("JetStream storage limit: nats-server's default (75% of the free space at start)", attrs...)
	case explicit > 0:
		log.Info("JetStream storage limit "+bytesize.Format(p.limit)+" (--max-store)", attrs...)
	default:
		log.Info("JetStream storage limit "+bytesize.Format(p.limit)+" (75% of the file system, at most what the store holds plus 75% of the free space; --max-store sets it)", attrs...)
	}
	return p.limit
}
