package nemesis

import (
	"context"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/transport/client"
)

// Config is what the nemesis and the schedule generator need of a run's
// configuration.
type Config struct {
	// Seed seeds the schedule and the nemesis's own random choices.
	Seed uint64
	// Nodes, Workers and Groups are the cluster size, the client
	// workers and their groups.
	Nodes, Workers, Groups int
	// Leased: the leased workload runs (worker faults apply; reconfig
	// sometimes slows the limit below one worker's share).
	Leased bool
	// Warmup, Duration and Tail place the faults: from Warmup to
	// Duration − Tail (the final heal).
	Warmup, Duration, Tail time.Duration
	// Specs are the fault kinds to compose; Schedule, if set, replaces
	// the generated schedule.
	Specs    []Spec
	Schedule []Event
}

// Limit is the workload's limit as the reconfig fault puts it again.
type Limit struct {
	// Name is the limit's name.
	Name string
	// Strict: the strict workload's limit, put with MaxReserved and
	// ExpiryNanos (the leased limit keeps its lease policy across a put).
	Strict bool
	// IntervalNanos is its original interval.
	IntervalNanos int64
	// MaxReserved and ExpiryNanos (strict) are its other settings.
	MaxReserved, ExpiryNanos int64
}

// Workers are the runner's client workers as the pause:workers fault
// sees them (goroutines of the runner: SIGSTOP is emulated by blocking
// them at their pause points).
type Workers interface {
	// PickHalf returns half the workers (rounded up), chosen by pick.
	PickHalf(pick uint64) []int
	// Pause and Resume block and release workers; ResumeAll releases
	// every one.
	Pause(ids []int)
	Resume(ids []int)
	ResumeAll()
}

// Sidecars are the leased workload's worker sidecars as the worker
// faults see them (package workload's *Fleet).
type Sidecars interface {
	// Members returns each sidecar's name and group, by index.
	Members() (names, groups []string)
	// Isolate cuts group off from the register with register fault mode
	// (RegisterDrop or RegisterBlackhole); mode "" lifts it.
	Isolate(ctx context.Context, group, mode string)
	// Pause and Resume send SIGSTOP and SIGCONT to sidecar i.
	Pause(i int) error
	Resume(i int) error
	// Kill reads sidecar i's counters one last time and kills it with
	// -9; Start starts it again with the same name and addresses.
	Kill(ctx context.Context, i int) error
	Start(i int) error
	// HealAll lifts every register fault and the relays' cut, restarts
	// dead relays and sidecars and continues paused sidecars.
	HealAll(ctx context.Context)

	// Relays returns the lease relays' names, by index (none: no relay).
	Relays() []string
	// KillRelay reads relay i's counters and kills it with -9; StopRelay
	// reads them and stops it gracefully; StartRelay starts it again
	// (with the same addresses) and waits until it serves.
	KillRelay(ctx context.Context, i int) error
	StopRelay(ctx context.Context, i int)
	StartRelay(ctx context.Context, i int) error
	// CutRelays cuts every relay off from the register with mode
	// (CutDrop or CutBlackhole); "" lifts the cut.
	CutRelays(mode string)
}

// Deps are what a Nemesis acts on and records into.
type Deps struct {
	Cluster *cluster.Cluster
	Control *cluster.Control
	History *history.Writer
	// Start is the history's time base.
	Start time.Time
	// Workers are the runner's client workers; Sidecars (leased workload
	// only, else nil) the worker sidecars.
	Workers  Workers
	Sidecars Sidecars
	// Limit is the workload's limit and Admin a client for its puts
	// (reconfig faults).
	Limit Limit
	Admin *client.Client
	// Logf receives progress lines.
	Logf func(string, ...any)
}

// Record is what one scheduled fault did.
type Record struct {
	// Index is the event's position in the schedule.
	Index int `json:"index"`
	// Event is the scheduled fault.
	Event Event `json:"event"`
	// Targets are the nodes (or workers, "w3") it hit.
	Targets []string `json:"targets"`
	// StartNanos and EndNanos are when it was applied and healed, in the
	// history's time base (EndNanos 0: never healed, the run was cut).
	StartNanos int64 `json:"start_ns"`
	EndNanos   int64 `json:"end_ns"`
	// Notes say how targets were chosen and what was observed.
	Notes []string `json:"notes,omitempty"`
	// Errors are the control requests that failed (a paused node cannot
	// answer; the fault state is pushed again when it can).
	Errors []string `json:"errors,omitempty"`
	// SnapshotForced (snapshot faults) reports that the leader was seen to
	// compact its log past the isolated follower before the heal.
	SnapshotForced bool `json:"snapshot_forced,omitempty"`
	// Transfers (transfer faults) are the leadership transfers made.
	Transfers []TransferRecord `json:"transfers,omitempty"`
	// Restarts (reconfig:snapshot-restart) are the nodes snapshotted,
	// killed and restarted, and how long each took to be ready.
	Restarts []RestartRecord `json:"restarts,omitempty"`
}
