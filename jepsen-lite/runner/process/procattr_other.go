//go:build !linux

package process

import "syscall"

// procAttr: no parent-death signal outside Linux; the runner stops every
// process by pid on its exit paths.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
