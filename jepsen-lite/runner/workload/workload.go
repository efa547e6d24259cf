package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
)

// Workload names (Config.Workload).
const (
	// Strict: one strict limit; workers reserve n permits and use them one
	// by one at their slots, each before it expires.
	Strict = "strict"
	// Window: one bursty limit; workers use a grant's permits together,
	// under the window discipline (MaxAnswerRTT, MaxLateUse).
	Window = "window"
	// Leased: real `permitd worker` sidecars lease one limit; client i
	// reserves from sidecar i and uses a grant at once (LeasedMaxUseDelay).
	Leased = "leased"
)

// Use discipline. Window: a worker uses a grant only if its answer came
// back within MaxAnswerRTT of sending the reserve and it woke up within
// MaxLateUse of the permit's ready time, so a permit is used at most
// MaxAnswerRTT + MaxLateUse after the slot the register decided (the
// window check's tolerance, plus the measured delivery jitter). Leased: a
// client uses a grant only if no more than LeasedMaxUseDelay has passed
// since the reserve's invoke when it sends the API call (the sidecar spent
// the permit between invoke and completion).
const (
	MaxAnswerRTT      = 100 * time.Millisecond
	MaxLateUse        = 20 * time.Millisecond
	LeasedMaxUseDelay = 100 * time.Millisecond
	// maxWorkerOps bounds one worker's loop.
	maxWorkerOps = 1_000_000
)

// LeasedConfig configures the leased workload's sidecars and limit. Zero
// values select the defaults documented on each field (the runner fills
// them in).
type LeasedConfig struct {
	// TTL is the workers' lease TTL (--ttl; default 1s, 100ms to 60s).
	TTL time.Duration `json:"ttl_ns"`
	// Margin is the workers' safety margin (--margin; 0: the worker's
	// default, 10 % of TTL, at least 50ms).
	Margin time.Duration `json:"margin_ns,omitempty"`
	// BurstPermits (C) and MaxOutstandingPermits (O) of the limit's lease
	// policy (default: one second of permits each, at least 1).
	BurstPermits          int64 `json:"burst_permits"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	// WorkerFlags are extra flags for every worker sidecar, for example
	// --test-double-lease.
	WorkerFlags []string `json:"worker_flags,omitempty"`
	// Relays is how many lease relays (`permitd relay`) some of the
	// sidecars send their lease commands through (see RelayCount and
	// RelayOf): 0 the default (2 from 3 workers on, 1 with 2), negative
	// none.
	Relays int `json:"relays,omitempty"`
}

// Config is what the workers need of a run's configuration.
type Config struct {
	// Workload is Strict, Window or Leased.
	Workload string
	// Seed seeds every worker's own random sequence.
	Seed uint64
	// Workers and Groups: worker i is in group g(i mod Groups + 1).
	Workers, Groups int
	// Interval is the limit's interval; MaxWait every reserve's max_wait.
	Interval, MaxWait time.Duration
	// MaxPermits is the most permits one reserve asks for (see
	// PermitDraws); MaxReserved the strict limit's max_reserved.
	MaxPermits, MaxReserved int64
	// Leased configures the sidecars (Leased only).
	Leased LeasedConfig
	// Multi names the multi workload's limits (Multi only).
	Multi MultiConfig
	// Templated configures the templated workload's keys (Templated
	// only).
	Templated TemplatedConfig
	// OutDir is the report directory (the sidecars' logs go to its
	// workers/ directory).
	OutDir string
	// Creds, in a secure run, are the TLS settings and tokens the clients
	// and sidecars reach the agents with (nil: plain HTTP, no token).
	Creds *secure.Creds
}

// Name names worker id with its group: g<id mod groups + 1>-w<id>.
func Name(id, groups int) string {
	return fmt.Sprintf("g%d-w%d", id%max(groups, 1)+1, id)
}

// Workers are the runner's client workers: goroutines that reserve and
// use permits, recording every reserve and API call in the history.
type Workers struct {
	cfg      Config
	start    time.Time
	hw       *history.Writer
	api      *fakeapi.Client
	limit    string
	servers  []string
	pool     *Pool
	turn     *turn
	fleet    *Fleet
	counters counters
	multi    multiCounters
	tmpl     templatedCounters
}

// New returns the workers of a run: they reserve from limit on servers
// (or, leased, from fleet's sidecars), call api, and record into hw, whose
// time base is start.
func New(cfg Config, start time.Time, hw *history.Writer, api *fakeapi.Client, limit string, servers []string, fleet *Fleet) *Workers {
	return &Workers{cfg: cfg, start: start, hw: hw, api: api, limit: limit, servers: servers,
		pool: NewPool(cfg.Workers), turn: newTurn(), fleet: fleet}
}

// Pool returns the workers' pause switches (the pause:workers fault).
func (w *Workers) Pool() *Pool { return w.pool }

// Stats returns what the workers did so far.
func (w *Workers) Stats() WorkerStats { return w.counters.snapshot() }

// Run runs worker id until ctx ends. It returns only history errors (and
// a client that cannot be built).
func (w *Workers) Run(ctx context.Context, id int) error {
	if w.cfg.Workload == Leased {
		if w.fleet == nil {
			return fmt.Errorf("workload: leased worker %d without sidecars", id)
		}
		return w.runLeased(ctx, id)
	}
	if w.cfg.Workload == Multi {
		return w.runMulti(ctx, id)
	}
	if w.cfg.Workload == Templated {
		return w.runTemplated(ctx, id)
	}
	return w.runDirect(ctx, id)
}
