package redistest

import "syscall"

// sysProcAttr makes the kernel SIGKILL the server when the thread that
// started it dies, so a crashed or killed test binary leaks no servers.
// (Go's runtime only ends a thread when a goroutine exits while locked to
// it with runtime.LockOSThread; tests must not start servers from one.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
