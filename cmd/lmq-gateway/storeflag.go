package main

import (
	"fmt"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/internal/bytesize"
)

// storeSize is --max-store: JetStream's storage limit in bytes, 0 for the
// default ("auto").
type storeSize int64

// minMaxStore is the smallest --max-store: less would not hold the
// gateway's own buckets and a few messages.
const minMaxStore = 1 << 20

func (s *storeSize) String() string {
	if s == nil || *s == 0 {
		return "auto"
	}
	return strings.ReplaceAll(bytesize.Format(int64(*s)), " ", "")
}

// Set reads "auto" (or "" or 0: the default) or a size such as 64MB, 10GiB.
func (s *storeSize) Set(v string) error {
	if t := strings.TrimSpace(v); t == "" || strings.EqualFold(t, "auto") {
		*s = 0
		return nil
	}
	n, err := bytesize.Parse(v)
	if err != nil {
		return err
	}
	if n != 0 && n < minMaxStore {
		return fmt.Errorf("%q: at least 1MiB (or auto)", v)
	}
	*s = storeSize(n)
	return nil
}

const maxStoreUsage = "the embedded NATS server's JetStream storage limit `SIZE` (max_file_store), e.g. 64MB, 10GiB, 1.5TB (KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: of 1024; at least 1MiB): " +
	"beyond it pushes are answered 503 with Retry-After (RPC: \"unavailable\") until queues are deleted, purged or drained, while pulls, acks, deletes and purges go on. " +
	"auto: 75% of the --data-dir file system's size, but no more than what the store holds plus 75% of the free space (a disk shared with other files). " +
	"Either is raised, with a warning, to what the store holds at start plus 1MiB, so that a restart of a full store never locks it out of the writes that free space; " +
	"a limit the disk cannot give is warned about. With --nats-url set max_file_store in nats-server's configuration instead"
