package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
)

// Exit codes of a run (Summary.ExitCode, and the jepsen command's status).
const (
	// ExitValid: every checker passed.
	ExitValid = 0
	// ExitSafety: a safety checker found a violation.
	ExitSafety = 1
	// ExitUsage: bad flags or configuration.
	ExitUsage = 2
	// ExitHarness: the run could not be carried out or judged completely
	// (no safety violation found in what could be judged).
	ExitHarness = 3
	// ExitLiveness: safe, but throughput did not recover after the heal.
	ExitLiveness = 4
)

// Summary is a run's result, written as summary.json.
type Summary struct {
	// Verdict is "valid", "unsafe" (a safety violation), "not recovered"
	// (liveness only) or "incomplete" (harness errors).
	Verdict       string `json:"verdict"`
	SafetyValid   bool   `json:"safety_valid"`
	LivenessValid bool   `json:"liveness_valid"`
	ExitCode      int    `json:"exit_code"`
	// Mode is the cluster mode that ran (namespaces or fallback);
	// ModeDetail says why and how faults were injected.
	Mode       string           `json:"mode"`
	ModeDetail string           `json:"mode_detail"`
	Namespaces NamespaceSupport `json:"namespaces"`
	// DistinctIPs reports that each node had its own IP (fallback: its
	// own loopback IP, inbound connections recognisable by the fault
	// layer; always true in the namespace mode).
	DistinctIPs bool `json:"distinct_loopback_ips"`
	// Command is the command line (set by the jepsen command).
	Command string `json:"command,omitempty"`
	Config  Config `json:"config"`
	Nemesis string `json:"nemesis"`
	Binary  string `json:"permitd_bin"`

	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	// HealNanos is the final heal, EndNanos the end of the workload, in
	// the history's time base.
	HealNanos int64 `json:"heal_ns"`
	EndNanos  int64 `json:"end_ns"`

	Limit         limitInfo       `json:"limit"`
	Schedule      []Event         `json:"schedule"`
	Nemeses       []NemesisRecord `json:"nemeses"`
	LeaderChanges []LeaderChange  `json:"leader_changes"`
	Workers       WorkerStats     `json:"workers"`
	APICalls      int             `json:"api_calls"`
	Jitter        checker.Jitter  `json:"jitter"`
	// TimelineLagNanos is real time minus cluster time elapsed over the
	// run (negative: the timeline ran ahead).
	TimelineLagNanos int64            `json:"timeline_lag_ns"`
	Checkers         []checker.Result `json:"checkers"`
	Phases           []Phase          `json:"phases"`
	Nodes            []NodeReport     `json:"nodes"`
	Files            []string         `json:"files"`
	// Leased reports the worker sidecars (leased workload only).
	Leased *LeasedSummary `json:"leased,omitempty"`
	// Multi reports the multi workload's settlements, releases and live
	// judge (multi workload only).
	Multi *MultiSummary `json:"multi,omitempty"`
	// Templated reports the templated workload's keys, KeysFull answers
	// and the nodes' template counters (templated workload only).
	Templated *TemplatedSummary `json:"templated,omitempty"`
	// Security reports a secure run's credentials and what the agents
	// said of their listeners (Config.Secure only).
	Security *SecurityReport `json:"security,omitempty"`
	// Errors are harness problems (not violations).
	Errors []string `json:"errors,omitempty"`
}

// NodeReport is one node's final state.
type NodeReport struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Restarts int    `json:"restarts"`
	// Status, Limits and State are the node's final GET /v1/status,
	// /v1/limits and /v1/debug/state (raw JSON).
	Status any    `json:"status,omitempty"`
	Limits any    `json:"limits,omitempty"`
	State  any    `json:"state,omitempty"`
	Log    string `json:"log"`
	// RemoteSnapshots counts the snapshots the node was seen to install
	// from a leader, through GET /v1/status (cluster.SnapshotInstall: it
	// needed an entry no other node still had, then its snapshot covered
	// it); a lower bound. SnapshotInstalls are those installs.
	RemoteSnapshots  int                       `json:"remote_snapshots"`
	SnapshotInstalls []cluster.SnapshotInstall `json:"snapshot_installs,omitempty"`
	Error            string                    `json:"error,omitempty"`
}

// Run carries out one run: it starts the cluster, the fake API, the
// workers and the nemesis, heals, waits for the cluster to settle, judges
// the history and writes the report to cfg.OutDir. It returns an error
// (and no summary) only for a bad configuration or output directory; every
// other problem is in the summary, whose ExitCode is the verdict. Every
// process it starts is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := PrepareOut(cfg.OutDir); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, log: cfg.Log}
	if r.log == nil {
		r.log = io.Discard
	}
	sum := r.execute(ctx)
	r.finish(sum)
	return sum, nil
}

// PrepareOut creates dir, which must be absent or empty (a report
// directory). Its error for a directory that is not empty wraps ErrInvalid.
func PrepareOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("runner: output directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("runner: output directory: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("%w: output directory %s is not empty; give a new --out", ErrInvalid, dir)
	}
	return nil
}

// run is one run's state.
type run struct {
	cfg   Config
	log   io.Writer
	logMu sync.Mutex
	start time.Time
	// lagSpan is the real time the timeline lag was measured over.
	lagSpan int64
	// creds are a secure run's credentials (nil: a plain run).
	creds *secure.Creds
}

func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	at := "setup"
	if !r.start.IsZero() {
		at = fmt.Sprintf("%6.2fs", time.Since(r.start).Seconds())
	}
	fmt.Fprintf(r.log, "jepsen [%s] %s\n", at, fmt.Sprintf(format, args...))
}
