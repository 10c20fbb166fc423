//go:build !linux

package bench

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// processCPU is not measured outside Linux.
func processCPU() time.Duration { return 0 }
