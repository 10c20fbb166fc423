package clusterit_test

import "syscall"

// sysProcAttr has the kernel kill the sentinel if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
