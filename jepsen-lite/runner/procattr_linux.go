package runner

import "syscall"

// procAttr makes an agent die with the runner (Linux: the parent-death
// signal), so that even a runner killed with -9 leaves no agent behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
