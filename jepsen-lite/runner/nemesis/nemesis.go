package nemesis

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

// activeFault is a fault being applied.
type activeFault struct {
	rec       *Record
	inv       history.Op
	blocks    map[string][]string // node ID → raft addresses it blocks both ways
	blockDial map[string][]string // node ID → raft addresses it may not dial
	loss      map[string]cluster.FaultState
	killed    []*cluster.Node
	paused    []*cluster.Node
	workers   []int
	clockGen  map[string]int // node ID → generation the clock change hit
	leaderIdx uint64         // snapshot: the leader's applied index at start
	// snapshot: the isolated follower and its last log index at start.
	follower     *cluster.Node
	followerLast uint64
	// undo heals a worker fault (leased workload) or puts a reconfigured
	// limit back, returning errors.
	undo func(context.Context) []string
	// launch starts a fault's background loop (transfer, reconfig) once
	// the fault is recorded; stop ends it and waits for it, before the
	// fault is healed.
	launch, stop func()
}

// Nemesis applies a schedule to a cluster and records it in the history
// (see the package documentation).
type Nemesis struct {
	cfg     Config
	cl      *cluster.Cluster
	ct      *cluster.Control
	hw      *history.Writer
	start   time.Time
	workers Workers
	fleet   Sidecars // leased workload: the worker sidecars (worker faults)
	rng     *rand.Rand
	logf    func(string, ...any)
	// limit is the workload's limit and admin a client for its puts
	// (reconfig faults).
	limit Limit
	admin *client.Client

	mu      sync.Mutex
	active  map[int]*activeFault
	records []*Record
	pushed  map[string]cluster.FaultState // last fault state each node accepted
	pushGen map[string]int                // the generation that accepted it
	healer  int                           // the heal op's process
	events  int                           // the schedule's length
	// slowed reports that a reconfig put may have left the limit slower
	// than its original configuration (the final heal restores it).
	slowed bool
}

// auxProcess is the history process of event i's own operations (each
// leadership transfer, each put of a reconfiguration), apart from the
// fault's own nemesis operation; i = events is the final heal's.
func (nm *Nemesis) auxProcess(i int) int { return -2 - nm.events - i }

// recordNote and recordError add to a record that a background loop may
// be filling.
func (nm *Nemesis) recordNote(rec *Record, note string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	rec.Notes = append(rec.Notes, note)
}

func (nm *Nemesis) recordError(rec *Record, e string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	rec.Errors = append(rec.Errors, e)
}

// New returns the nemesis of a run.
func New(cfg Config, d Deps) *Nemesis {
	logf := d.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Nemesis{
		cfg: cfg, cl: d.Cluster, ct: d.Control, hw: d.History, start: d.Start, workers: d.Workers, fleet: d.Sidecars,
		limit: d.Limit, admin: d.Admin, logf: logf,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)), healer: -1_000_000,
		active: map[int]*activeFault{}, pushed: map[string]cluster.FaultState{}, pushGen: map[string]int{},
	}
}

func (nm *Nemesis) now() int64 { return int64(time.Since(nm.start)) }

// tick is a fault's start or end.
type tick struct {
	at    time.Duration
	index int
	start bool
}

// Run applies events at their times, then heals everything at healAt. It
// returns when the heal is done or ctx ends (after healing as far as it
// can).
func (nm *Nemesis) Run(ctx context.Context, events []Event, healAt time.Duration) {
	nm.healer = -1 - len(events)
	nm.events = len(events)
	var ticks []tick
	for i, ev := range events {
		ticks = append(ticks, tick{ev.At, i, true}, tick{ev.Until, i, false})
	}
	slices.SortStableFunc(ticks, func(a, b tick) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return 0
		case !a.start:
			return -1 // ends before starts at the same instant
		}
		return 1
	})
	for _, tk := range ticks {
		if !nm.waitUntil(ctx, tk.at) {
			break
		}
		if tk.start {
			nm.begin(ctx, tk.index, events[tk.index])
		} else {
			nm.end(ctx, tk.index)
		}
		nm.reconcile(ctx)
	}
	nm.waitUntil(ctx, healAt)
	nm.healAll(context.WithoutCancel(ctx))
}

// waitUntil sleeps until the run's offset at, pushing fault states to
// nodes that missed them every half second. It reports false if ctx ended.
func (nm *Nemesis) waitUntil(ctx context.Context, at time.Duration) bool {
	for {
		left := time.Until(nm.start.Add(at))
		if left <= 0 {
			return true
		}
		if wait.Sleep(ctx, min(left, 500*time.Millisecond)) != nil {
			return false
		}
		nm.reconcile(ctx)
	}
}

// begin applies event i.
func (nm *Nemesis) begin(ctx context.Context, i int, ev Event) {
	rec := &Record{Index: i, Event: ev}
	af := &activeFault{rec: rec, blocks: map[string][]string{}, blockDial: map[string][]string{}, loss: map[string]cluster.FaultState{}, clockGen: map[string]int{}}
	var targets []*cluster.Node
	switch ev.Fault {
	case FaultPartition, FaultSnapshot:
		targets = nm.beginPartition(ctx, ev, rec, af)
	case FaultKill, FaultPause:
		targets = nm.beginProcessFault(ctx, ev, rec, af)
	case FaultClock:
		targets = nm.beginClock(ctx, ev, rec, af)
	case FaultWorker:
		if nm.fleet == nil {
			rec.Errors = append(rec.Errors, "worker faults need the leased workload's sidecars")
			break
		}
		rec.Targets, af.undo = nm.beginWorkerFault(ctx, ev, rec)
	case FaultRelay:
		if nm.fleet == nil || len(nm.fleet.Relays()) == 0 {
			rec.Errors = append(rec.Errors, "relay faults need the leased workload's relays")
			break
		}
		rec.Targets = nm.beginRelayFault(ctx, i, ev, af)
	case FaultTransfer:
		nm.beginTransfer(ctx, i, ev, af)
	case FaultReconfig:
		nm.beginReconfig(ctx, i, ev, af)
	case FaultLoss:
		targets = nm.beginLoss(ev, rec, af)
	}
	if rec.Targets == nil {
		rec.Targets = cluster.IDs(targets)
	}
	inv, err := nm.hw.Invoke(-1-i, "", history.FNemesis, "", history.NemesisValue{Fault: ev.Fault, Targets: rec.Targets, Detail: ev.Variant + nemesisDetail(rec)})
	if err != nil {
		rec.Errors = append(rec.Errors, err.Error())
	}
	af.inv = inv
	rec.StartNanos = inv.TimeNanos
	nm.mu.Lock()
	nm.active[i] = af
	nm.records = append(nm.records, rec)
	nm.mu.Unlock()
	nm.logf("nemesis %s on %v %s", ev.Name(), rec.Targets, strings.Join(rec.Notes, "; "))
	if af.launch != nil {
		af.launch()
	}
}

func nemesisDetail(rec *Record) string {
	if len(rec.Notes) == 0 {
		return ""
	}
	return ": " + strings.Join(rec.Notes, "; ")
}
