//go:build !linux

package e2e

import "os/exec"

// setDeathSignal: only Linux can tie the child's life to the test binary.
func setDeathSignal(*exec.Cmd) {}
