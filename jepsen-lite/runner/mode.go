package runner

import (
	"os"
	"os/exec"
)

// Modes of a run.
const (
	// ModeFallback: agents are processes on loopback and faults are
	// injected by permitd's own fault layer (faultnet.TCPFaults, behind
	// --test-hooks), the clock hooks and signals.
	ModeFallback = "fallback"
	// ModeNamespaces: each agent in its own network namespace, faults by
	// the kernel (not yet implemented).
	ModeNamespaces = "namespaces"
)

// NamespaceSupport says whether the primary mode (one network namespace
// per node) could run here, and why not.
type NamespaceSupport struct {
	// Available: running as root with ip(8) and network namespaces.
	Available bool `json:"available"`
	// Reason explains the verdict.
	Reason string `json:"reason"`
}

// DetectNamespaces checks, without changing anything, whether network
// namespaces could be used: root, ip(8) on the PATH, /proc/self/ns/net.
func DetectNamespaces() NamespaceSupport {
	if os.Geteuid() != 0 {
		return NamespaceSupport{Reason: "not running as root"}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return NamespaceSupport{Reason: "ip(8) not found on PATH"}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return NamespaceSupport{Reason: "no network namespaces (/proc/self/ns/net): " + err.Error()}
	}
	return NamespaceSupport{Available: true, Reason: "root, ip(8) and network namespaces are available"}
}
