package e2e

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the gateway if the test binary dies
// (a panic, or go test's -timeout), so no orphan keeps ports and files.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
