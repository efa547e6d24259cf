package process

import "syscall"

// procAttr makes a supervised process die with the runner (Linux: the
// parent-death signal), so that even a runner killed with -9 leaves no
// process behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
