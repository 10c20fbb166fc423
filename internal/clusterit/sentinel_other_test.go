//go:build !linux

package clusterit_test

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
