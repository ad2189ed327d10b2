package embedded

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// LockFile is the file in the data directory that a running server holds
// an exclusive lock on, and that names its process id. Two nats-servers on
// one JetStream directory would each believe they own it and corrupt it.
const LockFile = "lmq-gateway.lock"

// ErrDataDirLocked is wrapped by Start's error when another process holds
// the data directory.
var ErrDataDirLocked = errors.New("data directory in use")

// dirLock is the held lock of a data directory, until release (or the
// process's end: the kernel drops the lock of a killed process).
type dirLock struct {
	f *os.File
	// remove is the lock file to delete on release where the file's
	// existence is the lock (no flock(2)); "" keeps it.
	remove string
	once   sync.Once
}

func (l *dirLock) release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		// Closing the descriptor drops the lock. The file stays: removing it
		// would let a process that opened it just before lock a file nobody
		// else sees.
		_ = l.f.Close()
		if l.remove != "" {
			_ = os.Remove(l.remove)
		}
	})
}

// writePID records this process in the lock file, for the message of the
// process that finds the directory locked.
func (l *dirLock) writePID() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holderPID reads the process id in a lock file someone else holds; ""
// when it cannot be read (the holder may not have written it yet).
func holderPID(f *os.File) string {
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return s
}

func lockedError(dir, path, pid string) error {
	if pid == "" {
		pid = "unknown"
	}
	return fmt.Errorf("embedded: %w: %s is used by another process (pid %s), which holds the lock on %s; run one gateway per data directory (give this one another --data-dir)",
		ErrDataDirLocked, dir, pid, path)
}
