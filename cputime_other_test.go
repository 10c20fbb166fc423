//go:build !linux

package sluice_test

import "time"

// processCPU is not measured outside Linux.
func processCPU() time.Duration { return 0 }
