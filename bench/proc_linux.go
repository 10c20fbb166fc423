package bench

import "syscall"

// sysProcAttr has the kernel kill the server if the thread that started it
// dies, so a benchmark binary killed by -timeout leaks no server.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
