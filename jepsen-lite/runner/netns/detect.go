package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"time"
)

// Support says whether the namespace mode can run here, and why not.
type Support struct {
	// Available: running as root with ip(8), nft(8) and network
	// namespaces that the probe could create and filter.
	Available bool `json:"available"`
	// Reason explains the verdict.
	Reason string `json:"reason"`
}

// Detect checks whether network namespaces can be used: root, ip(8) and
// nft(8) on the PATH, /proc/self/ns/net, and then a real probe: under a
// blackhole route for its test /24 it creates a throwaway namespace,
// loads an nftables ruleset with every feature the mode uses into it,
// and removes both again.
func Detect() Support {
	if os.Geteuid() != 0 {
		return Support{Reason: "not running as root"}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return Support{Reason: "ip(8) not found on PATH (install iproute2)"}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return Support{Reason: "nft(8) not found on PATH (install nftables)"}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return Support{Reason: "no network namespaces (/proc/self/ns/net): " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := probe(ctx, osExecutor{}); err != nil {
		return Support{Reason: "probe failed: " + err.Error()}
	}
	return Support{Available: true, Reason: "root, ip(8), nft(8); probe created a network namespace, loaded nftables rules (drop, ct direction, numgen) into it and removed it"}
}

// probe shows that the namespace mode can run here: under the
// run's blackhole route it creates a throwaway namespace (loopback only),
// loads a ruleset using every nft feature the mode needs into it, and
// removes everything again.
func probe(ctx context.Context, ex executor) error {
	netnsMu.Lock()
	e := newNetnsEnv(ex, os.Getpid(), nil)
	e.locked = true
	defer e.Cleanup(context.WithoutCancel(ctx))
	if err := e.sweepStale(ctx); err != nil {
		return err
	}
	if err := e.claimGuard(ctx); err != nil {
		return err
	}
	ns := e.prefix + "-probe"
	if _, err := e.ip(ctx, "netns", "add", ns); err != nil {
		return err
	}
	if _, err := e.ip(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	peer := netip.AddrFrom4([4]byte{10, 213, 0, 2})
	script, err := nftRuleset(kernelFaults{Block: []netip.Addr{peer}, BlockDial: []netip.Addr{peer}, Peers: []netip.Addr{peer}, LossPermille: 10})
	if err != nil {
		return err
	}
	if _, err := ex.run(ctx, script, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("netns: nftables in a namespace: %w", err)
	}
	return e.Cleanup(context.WithoutCancel(ctx))
}
