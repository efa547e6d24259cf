package runner

import (
	"context"
	"fmt"

	"github.com/permitd/permitd/jepsen-lite/runner/netns"
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
	// package netns), delay and jitter still come from permitd's fault layer.
	ModeNamespaces = "namespaces"
)

// NamespaceSupport says whether the primary mode (one network namespace
// per node) could run here, and why not (see netns.Support).
type NamespaceSupport = netns.Support

// DetectNamespaces checks whether network namespaces can be used (see
// netns.Detect: root, ip(8), nft(8), and a real probe).
func DetectNamespaces() NamespaceSupport { return netns.Detect() }

// fallbackDetail describes the fallback mode.
const fallbackDetail = "fallback: agents on loopback; partitions, loss and delay by permitd's fault layer (faultnet.TCPFaults behind --test-hooks); clocks by the clock hook; kill/pause by signals"

// chooseMode settles the run's mode (cfg.Mode, DetectNamespaces) and, for
// the namespace mode, builds the network; it fills in sum's Mode,
// ModeDetail and Namespaces. In auto mode a failed setup falls back (and
// says why); with --mode namespaces it is an error. A non-nil env must be
// cleaned up by the caller.
func (r *run) chooseMode(ctx context.Context, sum *Summary) (*netns.Env, error) {
	sum.Namespaces = DetectNamespaces()
	sum.Mode, sum.ModeDetail = ModeFallback, fallbackDetail
	switch {
	case r.cfg.Mode == ModeFallback:
		sum.ModeDetail += ". Chosen by --mode fallback (namespaces: " + sum.Namespaces.Reason + ")"
		return nil, nil
	case !sum.Namespaces.Available && r.cfg.Mode == ModeNamespaces:
		sum.Mode, sum.ModeDetail = ModeNamespaces, "namespaces requested but unavailable: "+sum.Namespaces.Reason
		return nil, fmt.Errorf("netns: --mode namespaces: unavailable here: %s", sum.Namespaces.Reason)
	case !sum.Namespaces.Available:
		sum.ModeDetail += ". Network namespaces unavailable: " + sum.Namespaces.Reason
		return nil, nil
	}
	env, err := netns.Setup(ctx, r.cfg.Nodes, r.logf)
	if err != nil {
		if r.cfg.Mode == ModeNamespaces {
			sum.Mode, sum.ModeDetail = ModeNamespaces, "namespaces: setup failed: "+err.Error()
			return nil, err
		}
		sum.ModeDetail += ". The namespace setup failed, so the run fell back: " + err.Error()
		r.logf("namespace setup failed, falling back: %v", err)
		return nil, nil
	}
	sum.Mode, sum.ModeDetail = ModeNamespaces, env.Describe()
	return env, nil
}
