package nemesis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is wrapped by every error about a fault specification or a
// pinned schedule.
var ErrInvalid = errors.New("nemesis: invalid fault specification")

// Fault kinds (the --nemesis list).
const (
	// FaultPartition cuts nodes off from each other (variants: who).
	FaultPartition = "partition"
	// FaultKill kills agents with -9 and restarts them at the end.
	FaultKill = "kill"
	// FaultPause stops agents (or the runner's client workers) with
	// SIGSTOP and continues them at the end.
	FaultPause = "pause"
	// FaultClock jumps or skews the rate of agents' test clocks.
	FaultClock = "clock"
	// FaultLoss drops, delays and jitters node-to-node traffic.
	FaultLoss = "loss"
	// FaultSnapshot isolates a follower until the leader has compacted
	// its log past it, so that it must catch up from a snapshot.
	FaultSnapshot = "snapshot"
	// FaultWorker acts on the leased workload's worker sidecars: variants
	// isolate-group (cut one group off from the register: its sidecars
	// finish their leases, steal from the other groups, then fail
	// closed), pause (SIGSTOP half the sidecars) and kill (kill -9 one
	// sidecar, restarted at the fault's end).
	FaultWorker = "worker"
	// FaultTransfer moves the leadership from the leader A to another
	// node B and back to A, again and again within its window, through
	// POST /v1/cluster/transfer-leadership (transfer.go).
	FaultTransfer = "transfer"
	// FaultReconfig slows the workload's limit down (interval ×2 or ×3,
	// PUT /v1/limits/{name}) for its window and restores it at the
	// window's end; variant snapshot-restart then snapshots one node,
	// kills it with -9 and restarts it from its data directory
	// (reconfig.go). Strict and leased workloads.
	FaultReconfig = "reconfig"
	// FaultRelay acts on the leased workload's lease relays (relay.go):
	// variants kill (kill -9 one relay, restarted at the fault's end),
	// restart (kill -9 or stop one relay and start it again at once,
	// again and again through the window) and partition (cut every relay
	// off from the register, its connections dropped or blackholed; the
	// workers still reach both).
	FaultRelay = "relay"
)

// variants lists each fault kind's variants. Which apply depends on the
// cluster size (see variantsFor).
var variants = map[string][]string{
	FaultPartition: {"isolate-leader", "isolate-one", "halves", "ring", "bridge", "one-way"},
	FaultKill:      {"leader", "one", "minority", "all"},
	FaultPause:     {"leader", "one", "minority", "workers"},
	FaultClock:     {"skew-leader", "skew-one", "rate-leader", "rate-one", "skew-followers"},
	FaultLoss:      {"one", "all"},
	FaultSnapshot:  {"isolate-follower"},
	FaultWorker:    {"isolate-group", "pause", "kill"},
	FaultTransfer:  {"a-b-a"},
	FaultReconfig:  {"slow", "snapshot-restart"},
	FaultRelay:     {"kill", "restart", "partition"},
}

// faultKinds in a fixed order (schedules must not depend on map order).
var faultKinds = []string{FaultPartition, FaultKill, FaultPause, FaultClock, FaultLoss, FaultSnapshot, FaultWorker, FaultTransfer, FaultReconfig, FaultRelay}

// variantsFor returns the variants of kind that make sense with n nodes.
func variantsFor(kind string, n int) []string {
	var out []string
	for _, v := range variants[kind] {
		if kind == FaultPartition && v == "ring" && n < 5 {
			continue // with 3 nodes every node is next to both others
		}
		out = append(out, v)
	}
	return out
}

// Spec is one entry of --nemesis: a fault kind, optionally
// restricted to some of its variants ("partition:isolate-leader|bridge").
type Spec struct {
	// Kind is partition, kill, pause, clock, loss, snapshot, worker,
	// transfer, reconfig or relay.
	Kind string `json:"kind"`
	// Variants restricts the kind's variants; empty means all.
	Variants []string `json:"variants,omitempty"`
}

// Parse parses a --nemesis value: comma-separated KIND or
// KIND:VARIANT|VARIANT entries, "none" or "" for no faults.
func Parse(s string) ([]Spec, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []Spec
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		kind, vs, _ := strings.Cut(item, ":")
		if _, ok := variants[kind]; !ok {
			return nil, fmt.Errorf("%w: nemesis %q; allowed kinds: %s", ErrInvalid, kind, strings.Join(faultKinds, ", "))
		}
		if seen[kind] {
			return nil, fmt.Errorf("%w: nemesis %q given twice; give its variants once, separated by |", ErrInvalid, kind)
		}
		seen[kind] = true
		spec := Spec{Kind: kind}
		if vs != "" {
			for _, v := range strings.Split(vs, "|") {
				if !slices.Contains(variants[kind], v) {
					return nil, fmt.Errorf("%w: nemesis %s variant %q; allowed: %s", ErrInvalid, kind, v, strings.Join(variants[kind], ", "))
				}
				spec.Variants = append(spec.Variants, v)
			}
		}
		out = append(out, spec)
	}
	return out, nil
}

// Format renders specs in --nemesis syntax ("none" for no faults).
func Format(specs []Spec) string {
	var parts []string
	for _, s := range specs {
		p := s.Kind
		if len(s.Variants) > 0 {
			p += ":" + strings.Join(s.Variants, "|")
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// PickableVariants returns the variants of spec usable with n nodes.
func PickableVariants(spec Spec, n int) []string {
	all := variantsFor(spec.Kind, n)
	if len(spec.Variants) == 0 {
		return all
	}
	var out []string
	for _, v := range spec.Variants {
		if slices.Contains(all, v) {
			out = append(out, v)
		}
	}
	return out
}
