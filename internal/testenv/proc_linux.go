//go:build linux

package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithTest has Linux kill cmd's process when the test binary dies. A
// test binary that dies without running its cleanups (the -timeout panic,
// a SIGKILL) would otherwise leave its servers running: a sentinel or a
// cluster or NATS node left so keeps its address, which a later test may
// be given for a server of its own, and joins that test's topology.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
