//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes the exclusive lock on dir's LockFile: flock(2), held by the
// open descriptor, so that it ends with the process however it ends.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	// Not O_TRUNC: the file may be another process's, whose pid it names.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded: --data-dir %s: lock file: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, lockedError(dir, path, holderPID(f))
		}
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	l := &dirLock{f: f}
	if err := l.writePID(); err != nil {
		l.release()
		return nil, fmt.Errorf("embedded: lock file %s: %w", path, err)
	}
	return l, nil
}
