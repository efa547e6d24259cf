package runner

import (
	"context"
	"os"
	"os/exec"
	"time"
)

// Modes of a run (Config.Mode, Summary.Mode).
const (
	// ModeAuto (Config.Mode only, the default): the namespace mode when
	// DetectNamespaces finds it available, else the fallback mode.
	ModeAuto = "auto"
	// ModeFallback: agents are processes on loopback and faults are
	// injected by permitd's own fault layer (faultnet.TCPFaults, behind
	// --test-hooks), the clock hooks and signals.
	ModeFallback = "fallback"
	// ModeNamespaces: each agent in its own network namespace, joined by
	// veth pairs to a bridge in a namespace of its own; partitions and
	// packet loss are nftables rules in the nodes' namespaces (see
	// netns.go), delay and jitter still come from permitd's fault layer.
	ModeNamespaces = "namespaces"
)

// NamespaceSupport says whether the primary mode (one network namespace
// per node) could run here, and why not.
type NamespaceSupport struct {
	// Available: running as root with ip(8), nft(8) and network
	// namespaces that the probe could create and filter.
	Available bool `json:"available"`
	// Reason explains the verdict.
	Reason string `json:"reason"`
}

// DetectNamespaces checks whether network namespaces can be used: root,
// ip(8) and nft(8) on the PATH, /proc/self/ns/net, and then a real probe
// (probeNamespaces): under a blackhole route for its test /24 it creates
// a throwaway namespace, loads an nftables ruleset with every feature the
// mode uses into it, and removes both again.
func DetectNamespaces() NamespaceSupport {
	if os.Geteuid() != 0 {
		return NamespaceSupport{Reason: "not running as root"}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return NamespaceSupport{Reason: "ip(8) not found on PATH (install iproute2)"}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return NamespaceSupport{Reason: "nft(8) not found on PATH (install nftables)"}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return NamespaceSupport{Reason: "no network namespaces (/proc/self/ns/net): " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := probeNamespaces(ctx, osExecutor{}); err != nil {
		return NamespaceSupport{Reason: "probe failed: " + err.Error()}
	}
	return NamespaceSupport{Available: true, Reason: "root, ip(8), nft(8); probe created a network namespace, loaded nftables rules (drop, ct direction, numgen) into it and removed it"}
}
