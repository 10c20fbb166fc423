package sluice_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used:
// unlike the wall clock, it does not count the time other processes held
// the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
