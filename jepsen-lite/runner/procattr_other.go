//go:build !linux

package runner

import "syscall"

// procAttr: no parent-death signal outside Linux; the runner stops every
// agent by pid on its exit paths.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
