//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// lockDir on systems without flock(2) creates LockFile exclusively. This
// keeps a second process out, but a process that was killed leaves the file
// behind: delete it after making sure no gateway uses the directory.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		var pid string
		if g, err := os.Open(path); err == nil {
			pid = holderPID(g)
			g.Close()
		}
		return nil, fmt.Errorf("%w (if no process uses the directory, delete %s)", lockedError(dir, path, pid), path)
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: lock file: %w", err)
	}
	l := &dirLock{f: f, remove: path}
	if err := l.writePID(); err != nil {
		l.release()
		return nil, fmt.Errorf("embedded: lock file %s: %w", path, err)
	}
	return l, nil
}
