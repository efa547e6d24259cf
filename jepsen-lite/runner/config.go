package runner

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("runner: invalid configuration")

// ErrNotImplemented is wrapped by the error for a feature the runner does
// not have yet (none at present; kept for the jepsen command's exit 2).
var ErrNotImplemented = errors.New("runner: not yet implemented")

// Workloads (Config.Workload; see package workload).
const (
	// WorkloadStrict: one strict limit, "1 every Interval" with Expiry and
	// MaxReserved, judged by spacing, windows, conservation and
	// linearizability.
	WorkloadStrict = workload.Strict
	// WorkloadWindow: one bursty limit (Guava's SmoothBursty), "1 every
	// Interval" storing up to BurstSeconds of idle time, judged by the
	// README's window bound and conservation.
	WorkloadWindow = workload.Window
	// WorkloadLeased: real `permitd worker` sidecars in memberlist
	// groups lease one limit; judged by the README's leased bound and
	// lease conservation (see leased.go).
	WorkloadLeased = workload.Leased
)

// Fault kinds (the --nemesis list; see package nemesis).
const (
	FaultPartition = nemesis.FaultPartition
	FaultKill      = nemesis.FaultKill
	FaultPause     = nemesis.FaultPause
	FaultClock     = nemesis.FaultClock
	FaultLoss      = nemesis.FaultLoss
	FaultSnapshot  = nemesis.FaultSnapshot
	FaultWorker    = nemesis.FaultWorker
	FaultTransfer  = nemesis.FaultTransfer
	FaultReconfig  = nemesis.FaultReconfig
	FaultRelay     = nemesis.FaultRelay
)

// NemesisSpec is one entry of --nemesis (see nemesis.Spec).
type NemesisSpec = nemesis.Spec

// Event is one fault of a schedule (see nemesis.Event).
type Event = nemesis.Event

// NemesisRecord is what one scheduled fault did (see nemesis.Record).
type NemesisRecord = nemesis.Record

// TransferRecord is one leadership transfer of a transfer fault.
type TransferRecord = nemesis.TransferRecord

// RestartRecord is one node restarted by reconfig:snapshot-restart.
type RestartRecord = nemesis.RestartRecord

// LeaderChange is an observed change of leadership (see cluster.Observer).
type LeaderChange = cluster.LeaderChange

// WorkerStats counts what the client workers did (see package workload).
type WorkerStats = workload.WorkerStats

// LeasedConfig configures the leased workload (see package workload).
type LeasedConfig = workload.LeasedConfig

// LeasedSummary is the leased workload's part of the summary.
type LeasedSummary = workload.LeasedSummary

// LeasedWorkerReport is one sidecar in the summary.
type LeasedWorkerReport = workload.LeasedWorkerReport

// ParseNemeses parses a --nemesis value: comma-separated KIND or
// KIND:VARIANT|VARIANT entries, "none" or "" for no faults. Its errors
// wrap ErrInvalid.
func ParseNemeses(s string) ([]NemesisSpec, error) {
	specs, err := nemesis.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return specs, nil
}

// Generate returns the schedule for c (see nemesis.Generate).
func Generate(c Config) []Event { return nemesis.Generate(c.nemesisConfig()) }

// Validate checks c as Run would, without running it (a sweep checks
// every run it plans before the first starts). Its errors wrap ErrInvalid.
func Validate(c Config) error {
	_, err := c.withDefaults()
	return err
}

// nemesisConfig is what package nemesis needs of c.
func (c Config) nemesisConfig() nemesis.Config {
	return nemesis.Config{Seed: c.Seed, Nodes: c.Nodes, Workers: c.Workers, Groups: c.Groups, Leased: c.Workload == WorkloadLeased,
		Warmup: c.Warmup, Duration: c.Duration, Tail: c.Tail, Specs: c.Nemeses, Schedule: c.Schedule}
}

// workloadConfig is what package workload needs of c (without a secure
// run's credentials: see run.workloadConfig).
func (c Config) workloadConfig() workload.Config {
	return workload.Config{Workload: c.Workload, Seed: c.Seed, Workers: c.Workers, Groups: c.Groups, Interval: c.Interval, MaxWait: c.MaxWait,
		MaxPermits: c.MaxPermits, MaxReserved: c.MaxReserved, Leased: c.Leased, Multi: c.multiWorkload(), Templated: c.templatedWorkload(), OutDir: c.OutDir}
}

// Config configures one run. Zero values select the defaults documented
// on each field (see withDefaults).
type Config struct {
	// Nodes is the cluster size: 3 or 5.
	Nodes int `json:"nodes"`
	// Workers is the number of client workers (default 4, at most 64).
	Workers int `json:"workers"`
	// Groups labels workers in G groups (default 1). Groups matter only
	// to the leased workload.
	Groups int `json:"groups"`
	// Workload is strict, window, leased, multi or templated.
	Workload string `json:"workload"`
	// Mode is the cluster mode: auto (the default: namespaces when
	// available, else fallback), namespaces (an incomplete run when
	// unavailable) or fallback.
	Mode string `json:"mode"`
	// Nemeses are the fault kinds the generator composes; none for a
	// fault-free run.
	Nemeses []NemesisSpec `json:"nemeses"`
	// Duration is the whole run, from the first reserve to the last
	// (default 60s; at least 15s).
	Duration time.Duration `json:"duration_ns"`
	// Seed seeds the schedule and the runner's random choices; the same
	// seed and configuration replay the same schedule.
	Seed uint64 `json:"seed"`
	// OutDir receives the report; it must not exist or be empty.
	OutDir string `json:"out_dir"`
	// PermitdBin is the permitd binary; empty builds one from ModuleRoot
	// into ModuleRoot/tmp/permitd.
	PermitdBin string `json:"permitd_bin"`
	// ModuleRoot is permitd's source tree (default: found from the working
	// directory).
	ModuleRoot string `json:"-"`
	// Secure runs everything over TLS with API tokens: the runner makes a
	// CA, node certificates (valid for every node address and loopback)
	// and tokens with the permitd binary; the agents serve the API over
	// TLS 1.3 and raft over mutual TLS and require a token; the runner's
	// clients and control requests use TLS and the admin token, the
	// leased workload's sidecars TLS and a worker token (see secure.go).
	Secure bool `json:"secure,omitempty"`

	// Interval is the limit's spacing I: 1 permit per Interval (default
	// 200ms).
	Interval time.Duration `json:"interval_ns"`
	// Expiry (strict) is how long after its slot a permit may be used
	// (default Interval/2, the server's default).
	Expiry time.Duration `json:"expiry_ns"`
	// MaxReserved (strict) is how many slots may be reserved ahead
	// (default 4).
	MaxReserved int64 `json:"max_reserved"`
	// MaxWait is the reserves' max_wait (default (MaxReserved+1)·Interval
	// for strict, 1s for window).
	MaxWait time.Duration `json:"max_wait_ns"`
	// MaxPermits is the most permits one reserve asks for: each reserve
	// asks for n = 1 three times in four, else for n uniform in
	// 2..MaxPermits, drawn per worker from the seed. Strict: default and
	// at most MaxReserved+1 (a strict grant of n permits uses them one by
	// one, spacing_ns apart); window: default 1, at most 100 (the permits
	// of a bursty grant are used together); leased: 1 (the sidecars grant
	// one permit per reserve).
	MaxPermits int64 `json:"max_permits"`
	// BurstSeconds (window) is the bursty limit's max_burst_seconds
	// (default 1).
	BurstSeconds float64 `json:"burst_seconds"`

	// Warmup is the fault-free start (default 3s); Tail the fault-free end
	// after the final heal, during which recovery is measured (default
	// max(10s, Duration/4)).
	Warmup time.Duration `json:"warmup_ns"`
	Tail   time.Duration `json:"tail_ns"`
	// RecoveryWithin is the stated time within which throughput must be
	// back to RecoveryFraction of the limit after the final heal (default
	// 8s, fraction 0.8).
	RecoveryWithin   time.Duration `json:"recovery_within_ns"`
	RecoveryFraction float64       `json:"recovery_fraction"`
	// LinearizabilityTimeout bounds porcupine's search (default max(60s,
	// Duration/4)); a search that times out makes the run incomplete.
	LinearizabilityTimeout time.Duration `json:"linearizability_timeout_ns"`

	// AgentFlags are extra flags for every agent, for example
	// --test-break-timeline.
	AgentFlags []string `json:"agent_flags,omitempty"`
	// AgentFlagsFor, if set, returns extra flags for node index i (0-based)
	// after AgentFlags.
	AgentFlagsFor func(i int) []string `json:"-"`
	// Leased configures the leased workload.
	Leased LeasedConfig `json:"leased"`
	// Multi configures the multi workload.
	Multi MultiConfig `json:"multi"`
	// Templated configures the templated workload.
	Templated TemplatedConfig `json:"templated"`
	// Schedule, if set, replaces the generated schedule (tests pin exact
	// scenarios with it). Its faults need not be listed in Nemeses.
	Schedule []Event `json:"-"`

	// Command is the command line, for the report.
	Command string `json:"-"`
	// Log receives progress lines (nil: discarded).
	Log io.Writer `json:"-"`
}

// Limits on the configuration.
const (
	maxWorkers  = 64
	maxGroups   = 64
	minDuration = 15 * time.Second
	maxDuration = 24 * time.Hour
)

// withDefaults validates c and returns it with defaults filled in.
func (c Config) withDefaults() (Config, error) {
	steps := []func(Config) (Config, error){
		Config.workloadDefaults, Config.sizeDefaults, Config.pacingDefaults,
		Config.permitDefaults, Config.phaseDefaults, Config.faultChecks,
	}
	for _, step := range steps {
		var err error
		if c, err = step(c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// workloadDefaults checks the workload (filling in its own defaults) and
// the mode.
func (c Config) workloadDefaults() (Config, error) {
	switch c.Workload {
	case "":
		c.Workload = WorkloadStrict
	case WorkloadStrict, WorkloadWindow:
	case WorkloadMulti:
		var err error
		if c, err = c.multiDefaults(); err != nil {
			return c, err
		}
	case WorkloadLeased:
		var err error
		if c, err = c.leasedDefaults(); err != nil {
			return c, err
		}
	case WorkloadTemplated:
		var err error
		if c, err = c.templatedDefaults(); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("%w: workload %q; allowed: %s, %s, %s, %s, %s", ErrInvalid, c.Workload, WorkloadStrict, WorkloadWindow, WorkloadLeased, WorkloadMulti, WorkloadTemplated)
	}
	switch c.Mode {
	case "":
		c.Mode = ModeAuto
	case ModeAuto, ModeNamespaces, ModeFallback:
	default:
		return c, fmt.Errorf("%w: mode %q; allowed: %s, %s, %s", ErrInvalid, c.Mode, ModeAuto, ModeNamespaces, ModeFallback)
	}
	return c, nil
}

// sizeDefaults checks the cluster's and the workload's size, the
// duration and the output directory.
func (c Config) sizeDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Nodes != 3 && c.Nodes != 5 {
		return c, fmt.Errorf("%w: %d nodes; allowed: 3 or 5", ErrInvalid, c.Nodes)
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Workers < 1 || c.Workers > maxWorkers {
		return c, fmt.Errorf("%w: %d workers; allowed: 1 to %d", ErrInvalid, c.Workers, maxWorkers)
	}
	if c.Groups == 0 {
		c.Groups = 1
	}
	if c.Groups < 1 || c.Groups > maxGroups || c.Groups > c.Workers {
		return c, fmt.Errorf("%w: %d groups; allowed: 1 to min(%d, workers = %d)", ErrInvalid, c.Groups, maxGroups, c.Workers)
	}
	if c.Duration == 0 {
		c.Duration = 60 * time.Second
	}
	if c.Duration < minDuration || c.Duration > maxDuration {
		return c, fmt.Errorf("%w: duration %v; allowed: %v to %v", ErrInvalid, c.Duration, minDuration, maxDuration)
	}
	if c.OutDir == "" {
		return c, fmt.Errorf("%w: no output directory; give --out DIR", ErrInvalid)
	}
	return c, nil
}

// pacingDefaults checks the limit's interval, expiry, reservations and
// burst.
func (c Config) pacingDefaults() (Config, error) {
	if c.Interval == 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.Interval < 20*time.Millisecond || c.Interval > time.Minute {
		return c, fmt.Errorf("%w: interval %v; allowed: 20ms to 1m (much longer than a reserve's latency, much shorter than the run)", ErrInvalid, c.Interval)
	}
	if c.Expiry == 0 {
		c.Expiry = c.Interval / 2
	}
	if c.Expiry < 0 || c.Expiry >= c.Interval {
		return c, fmt.Errorf("%w: expiry %v; allowed: > 0 and < interval %v (the spacing at use is interval - expiry)", ErrInvalid, c.Expiry, c.Interval)
	}
	if c.MaxReserved == 0 {
		c.MaxReserved = 4
	}
	if c.MaxReserved < 0 || c.MaxReserved > 1000 {
		return c, fmt.Errorf("%w: max reserved %d; allowed: 1 to 1000", ErrInvalid, c.MaxReserved)
	}
	if c.BurstSeconds == 0 {
		c.BurstSeconds = 1
	}
	if !(c.BurstSeconds > 0 && c.BurstSeconds <= 60) {
		return c, fmt.Errorf("%w: burst seconds %v; allowed: (0, 60]", ErrInvalid, c.BurstSeconds)
	}
	return c, nil
}

// permitDefaults checks a reserve's wait and permits.
func (c Config) permitDefaults() (Config, error) {
	if c.MaxWait == 0 {
		if c.Workload == WorkloadStrict {
			c.MaxWait = time.Duration(c.MaxReserved+1) * c.Interval
		} else {
			c.MaxWait = time.Second
		}
	}
	switch {
	case c.MaxPermits < 0:
		return c, fmt.Errorf("%w: max permits %d; allowed: 0 (the default) or more", ErrInvalid, c.MaxPermits)
	case c.Workload == WorkloadStrict && c.MaxPermits == 0:
		c.MaxPermits = c.MaxReserved + 1
	case c.MaxPermits == 0:
		c.MaxPermits = 1
	}
	switch {
	case c.Workload == WorkloadStrict && c.MaxPermits > c.MaxReserved+1:
		return c, fmt.Errorf("%w: max permits %d; allowed for %s: 1 to max reserved + 1 = %d (the most a strict grant can hold)", ErrInvalid, c.MaxPermits, c.Workload, c.MaxReserved+1)
	case c.Workload == WorkloadWindow && c.MaxPermits > 100:
		return c, fmt.Errorf("%w: max permits %d; allowed for %s: 1 to 100", ErrInvalid, c.MaxPermits, c.Workload)
	case c.Workload == WorkloadLeased && c.MaxPermits != 1:
		return c, fmt.Errorf("%w: max permits %d; allowed for %s: 1 (a sidecar grants one permit per reserve)", ErrInvalid, c.MaxPermits, c.Workload)
	}
	if c.MaxWait < 0 || c.MaxWait > time.Minute {
		return c, fmt.Errorf("%w: max wait %v; allowed: 0 to 1m", ErrInvalid, c.MaxWait)
	}
	return c, nil
}

// phaseDefaults checks the warmup, the tail and the recovery measure.
func (c Config) phaseDefaults() (Config, error) {
	if c.Warmup == 0 {
		c.Warmup = 3 * time.Second
	}
	if c.Tail == 0 {
		c.Tail = max(10*time.Second, c.Duration/4)
	}
	if c.RecoveryWithin == 0 {
		c.RecoveryWithin = 8 * time.Second
	}
	if c.RecoveryFraction == 0 {
		c.RecoveryFraction = 0.8
	}
	if !(c.RecoveryFraction > 0 && c.RecoveryFraction <= 1) {
		return c, fmt.Errorf("%w: recovery fraction %v; allowed: (0, 1]", ErrInvalid, c.RecoveryFraction)
	}
	if c.Warmup < 0 || c.Tail < 0 || c.Warmup+c.Tail > c.Duration-5*time.Second {
		return c, fmt.Errorf("%w: warmup %v + tail %v leave less than 5s of faults in %v", ErrInvalid, c.Warmup, c.Tail, c.Duration)
	}
	if c.Tail < c.RecoveryWithin+10*c.Interval {
		return c, fmt.Errorf("%w: tail %v is shorter than recovery within %v + a measuring window of 10 intervals (%v)", ErrInvalid, c.Tail, c.RecoveryWithin, 10*c.Interval)
	}
	if c.LinearizabilityTimeout == 0 {
		c.LinearizabilityTimeout = max(60*time.Second, c.Duration/4)
	}
	return c, nil
}

// faultChecks checks the nemeses and the pinned schedule against the
// rest of the configuration.
func (c Config) faultChecks() (Config, error) {
	for _, n := range c.Nemeses {
		if len(nemesis.PickableVariants(n, c.Nodes)) == 0 {
			return c, fmt.Errorf("%w: nemesis %s: no variant of %v applies to %d nodes", ErrInvalid, n.Kind, n.Variants, c.Nodes)
		}
	}
	for _, ev := range c.Schedule {
		if err := ev.Validate(c.Duration - c.Tail); err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := c.validateWorkerFaults(); err != nil {
		return c, err
	}
	if c.Workload == WorkloadWindow && c.hasFault(FaultReconfig) {
		return c, fmt.Errorf("%w: nemesis %s applies to the %s and %s workloads (the guarantees manual, fsm/README.md, states no bound across a change of a bursty limit)", ErrInvalid, FaultReconfig, WorkloadStrict, WorkloadLeased)
	}
	return c, nil
}

// hasFault reports whether the run may inject kind (by the nemesis list
// or the pinned schedule).
func (c Config) hasFault(kind string) bool {
	for _, n := range c.Nemeses {
		if n.Kind == kind {
			return true
		}
	}
	for _, ev := range c.Schedule {
		if ev.Fault == kind {
			return true
		}
	}
	return false
}
