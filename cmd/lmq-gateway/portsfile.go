package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lmq-gateway/lmq-gateway/server"
)

// writePortsFile writes the addresses the server bound to path (--ports-file)
// as a JSON object, atomically: a temporary file in the same directory,
// renamed over path, so that a reader polling for the file never sees half
// of it. Written early with the embedded server's ports (complete false) and
// again once every listener is bound (complete true).
func writePortsFile(path string, a server.Addrs) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("--ports-file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--ports-file: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("--ports-file %s: %w", path, errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("--ports-file: %w", err)
	}
	return nil
}
