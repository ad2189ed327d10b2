//go:build !(linux || darwin || freebsd)

package embedded

import (
	"errors"
	"runtime"
)

// diskSpace is not measured here: the limit is --max-store's, or
// nats-server's default.
func diskSpace(string) (fsSpace, error) {
	return fsSpace{}, errors.New("not measured on " + runtime.GOOS)
}
