package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// options are the command's flags.
type options struct {
	workers, groups []int
	ratePerWorker   float64
	ttl             time.Duration
	warmup, window  time.Duration
	sampleEvery     time.Duration
	phaseTimeout    time.Duration
	tolerance       float64
	hold            int
	deadline        time.Duration
	startTimeout    time.Duration
	permitd         string
	jsonOut, svgOut string
	fromJSON        string
	registerLoad    []int
	pprofOut        string
	via             string
	protocol        string
	clients         int
	relays          int
	alignEvery      time.Duration
	gossip          string
	rejoinEvery     time.Duration
	// gossipUncompressed turns memberlist's compression off (on by default).
	gossipUncompressed bool
	// gossipSlowdown multiplies memberlist's LAN timings (probe interval
	// and timeout, gossip and push/pull intervals).
	gossipSlowdown int
	// startParallel is how many workers start at once.
	startParallel int
	// debugAddr serves the measuring process's profiler (empty: none).
	debugAddr string
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	var o options
	var workers, groups string
	flag.StringVar(&workers, "workers", "10,100", "worker counts (1000 does not fit a 2-core machine: see cmd/internal/bench/README.md)")
	flag.StringVar(&groups, "groups", "1,10,50", "group counts (a count above the worker count is skipped)")
	flag.Float64Var(&o.ratePerWorker, "rate-per-worker", 100, "the limit's rate is this times the worker count, permits/s; the fleet is offered 1.5x that")
	flag.DurationVar(&o.ttl, "ttl", 0, "lease TTL (0: the worker's default, 2s, renewed every TTL/2)")
	flag.DurationVar(&o.warmup, "warmup", 4*time.Second, "wait after the fleet started before measuring")
	flag.DurationVar(&o.window, "window", 15*time.Second, "steady-state measurement window")
	flag.DurationVar(&o.sampleEvery, "sample-every", 250*time.Millisecond, "lease view sampling period while waiting for convergence")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 30*time.Second, "longest wait for convergence after a join, leave, cut or heal")
	flag.Float64Var(&o.tolerance, "tolerance", 0.02, "converged: every group's share within this fraction of its target (and exactly the right leases active)")
	flag.IntVar(&o.hold, "hold", 4, "converged only if it stays so for this many samples")
	flag.DurationVar(&o.startTimeout, "start-timeout", 150*time.Second, "longest time to start one configuration's workers")
	flag.DurationVar(&o.deadline, "deadline", 20*time.Minute, "hard deadline of the whole sweep")
	flag.StringVar(&o.permitd, "permitd", "", "permitd binary (default: go build ./cmd/permitd into a temporary directory)")
	flag.StringVar(&o.jsonOut, "json", "leased-scale.json", "write the results here (- for stdout, empty for none)")
	flag.StringVar(&o.svgOut, "svg", "leased-scale.svg", "write the chart here (empty for none)")
	flag.StringVar(&o.fromJSON, "from-json", "", "do not measure: redraw the chart and table from this results file (or files, comma-separated: their results merged, run with the same fleet settings)")
	var load string
	flag.StringVar(&load, "register-load", "", "instead of the sweep: holder counts (e.g. 100,1000) to run as lease holders without gossip against the register, in each -groups count (see registerload.go)")
	flag.StringVar(&o.via, "via", "leader", "which nodes the holders (workers, or -register-load's holders) talk to first: leader, followers (all at one), nodes (holder i at node i mod 3) or spread (as nodes, but a holder whose node is the leader starts at a follower, as permitd worker does)")
	flag.StringVar(&o.protocol, "protocol", "binary", "the holders' lease commands over binary (the worker's default) or http")
	flag.StringVar(&o.gossip, "gossip", "udp", "the workers' gossip network: udp (memberlist's NetTransport on loopback, as a real fleet) or mem (in memory, memnet.go: fits a thousand workers in this process)")
	flag.DurationVar(&o.rejoinEvery, "rejoin-every", 0, "the workers' RejoinEvery (0: their default, worker.DefaultRejoinEvery)")
	flag.BoolVar(&o.gossipUncompressed, "gossip-uncompressed", false, "turn memberlist's gossip compression off (its LAN default is on): the bytes counted are then uncompressed")
	flag.IntVar(&o.startParallel, "start-parallel", 16, "workers started at once (each joins the fleet's gossip: at hundreds of in-process workers, fewer at once keep memberlist's join traffic from starving the probes)")
	flag.IntVar(&o.gossipSlowdown, "gossip-slowdown", 1, "multiply memberlist's LAN timings (probe interval and timeout, gossip and push/pull intervals) by this: hundreds of memberlists in one process on a small machine miss each other's probe deadlines and fall into suspicion storms at the defaults (see the README)")
	flag.DurationVar(&o.alignEvery, "align-every", 0, "with -register-load: each holder sends its renewal at the next multiple of this period (what a group relay that flushes this often would send; 0: at its own phase)")
	flag.IntVar(&o.relays, "relays", 0, "run this many `permitd relay` processes and send the lease commands of worker (or -register-load holder) i to relay i mod N first (0: none); a worker i is in group i mod G, so -relays G gives each group its relay")
	flag.IntVar(&o.clients, "clients", 0, "spread the holders over this many clients, each with its own connections (0: one per holder, as a real fleet)")
	flag.StringVar(&o.debugAddr, "debug-addr", "", "serve Go's profiler for this process (the in-process workers) at this loopback host:port, under /debug/pprof/")
	flag.StringVar(&o.pprofOut, "pprof-out", "", "with -register-load: save the leader's CPU profile over the window here, and each follower's at this path + .followerN")
	flag.Parse()
	var err error
	if o.workers, err = parseInts(workers); err == nil {
		o.groups, err = parseInts(groups)
	}
	if err == nil && load != "" {
		o.registerLoad, err = parseInts(load)
	}
	if err == nil && o.via != "leader" && o.via != "followers" && o.via != "nodes" && o.via != "spread" {
		err = fmt.Errorf("-via %q: want leader, followers, nodes or spread", o.via)
	}
	if err == nil && o.protocol != "binary" && o.protocol != "http" {
		err = fmt.Errorf("-protocol %q: want binary or http", o.protocol)
	}
	if err == nil && (o.gossipSlowdown < 1 || o.gossipSlowdown > 100) {
		err = fmt.Errorf("-gossip-slowdown %d: want 1 to 100", o.gossipSlowdown)
	}
	if err == nil && (o.relays < 0 || o.relays > 100) {
		err = fmt.Errorf("-relays %d: want 0 to 100", o.relays)
	}
	if err == nil && o.relays > 0 && o.protocol != "binary" {
		err = errors.New("-relays needs -protocol binary: a relay serves the binary protocol's lease commands only")
	}
	if err == nil && o.startParallel < 1 {
		err = fmt.Errorf("-start-parallel %d: want at least 1", o.startParallel)
	}
	if err == nil && o.gossip != "udp" && o.gossip != "mem" {
		err = fmt.Errorf("-gossip %q: want udp or mem", o.gossip)
	}
	if err == nil && o.debugAddr != "" {
		err = serveDebug(o.debugAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leased-scale:", err)
		os.Exit(2)
	}
	// The deadline is hard: a run stuck past it (a worker's Start or
	// Stop that does not return) ends the process; the agents die with it.
	time.AfterFunc(o.deadline+30*time.Second, func() {
		fmt.Fprintln(os.Stderr, "leased-scale: hard deadline passed; exiting")
		os.Exit(3)
	})
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "leased-scale:", err)
		os.Exit(1)
	}
}

// run measures as o says (the sweep, or -register-load) or reads the
// results of earlier runs (-from-json), then writes the results, the
// chart and the table.
func run(o options) error {
	if o.fromJSON != "" {
		rep, err := readReports(strings.Split(o.fromJSON, ","))
		if err != nil {
			return err
		}
		return present(o, rep)
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, o.deadline)
	defer cancel()
	tmp, err := os.MkdirTemp("", "leased-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := o.permitd
	if bin == "" {
		if bin, err = cluster.Build(ctx, tmp); err != nil {
			return err
		}
	}
	if o.registerLoad != nil {
		return runRegisterLoad(ctx, o, setup{bin, tmp})
	}
	rep, err := sweep(ctx, o, setup{bin, tmp})
	if err != nil {
		return err
	}
	if err := writeJSON(o.jsonOut, rep); err != nil {
		return err
	}
	return present(o, rep)
}

// sweep measures every worker count in every group count (skipping more
// groups than workers), writing the results after each configuration so
// that a sweep cut short keeps what it measured.
func sweep(ctx context.Context, o options, s setup) (report, error) {
	rep := report{Started: time.Now().UTC().Format(time.RFC3339), TTL: o.ttl.String(), Tolerance: o.tolerance,
		RatePerWorker: o.ratePerWorker, Window: o.window.String(), Warmup: o.warmup.String(),
		Gossip: o.gossip, GossipCompressed: !o.gossipUncompressed, GossipSlowdown: o.gossipSlowdown,
		Via: o.via, Protocol: o.protocol, ClientsShared: o.clients, Relays: o.relays}
	if o.ttl == 0 {
		rep.TTL = "2s (default)"
	}
	for _, w := range o.workers {
		for _, g := range o.groups {
			if g > w {
				fmt.Fprintf(os.Stderr, "skip %d workers in %d groups\n", w, g)
				continue
			}
			if ctx.Err() != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d workers in %d groups: not run, deadline reached", w, g))
				continue
			}
			fmt.Fprintf(os.Stderr, "== %d workers in %d groups\n", w, g)
			res, err := measure(ctx, o, s, w, g)
			if err != nil {
				fmt.Fprintf(os.Stderr, "   failed: %v\n", err)
				res.Error = err.Error()
			}
			rep.Results = append(rep.Results, res)
			printRow(os.Stderr, res)
			if err := writeJSON(o.jsonOut, rep); err != nil {
				return rep, err
			}
		}
	}
	rep.Growth = growth(rep.Results)
	return rep, nil
}

// present writes the chart (-svg) and prints the table.
func present(o options, rep report) error {
	if o.svgOut != "" {
		f, err := os.Create(o.svgOut)
		if err != nil {
			return err
		}
		if err := writeSVG(f, rep.chartTitle(), chartPanels(rep), 3); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	writeTable(os.Stdout, rep)
	return nil
}

// report is the JSON output.
type report struct {
	Started       string  `json:"started"`
	TTL           string  `json:"ttl"`
	RatePerWorker float64 `json:"rate_per_worker"`
	Tolerance     float64 `json:"tolerance"`
	Warmup        string  `json:"warmup"`
	Window        string  `json:"window"`
	// How the fleet ran: its gossip network (udp or mem), memberlist's
	// compression and timing multiplier, and the workers' register clients.
	Gossip           string             `json:"gossip,omitempty"`
	GossipCompressed bool               `json:"gossip_compressed"`
	GossipSlowdown   int                `json:"gossip_slowdown,omitempty"`
	Via              string             `json:"via,omitempty"`
	Protocol         string             `json:"protocol,omitempty"`
	ClientsShared    int                `json:"clients_shared,omitempty"`
	Relays           int                `json:"relays,omitempty"`
	Results          []result           `json:"results"`
	Growth           map[string]float64 `json:"growth_exponents,omitempty"`
	Notes            []string           `json:"notes,omitempty"`
}

// result is one configuration's measurements. Times are seconds; -1: not
// converged within the phase timeout.
type result struct {
	Workers int     `json:"workers"`
	Groups  int     `json:"groups"`
	Rate    float64 `json:"rate_permits_per_sec"`
	StartS  float64 `json:"start_seconds"`

	WindowS            float64 `json:"window_seconds"`
	EntriesPerSec      float64 `json:"raft_entries_per_sec"`
	CommandsPerSec     float64 `json:"lease_commands_per_sec"`
	RenewalsPerSec     float64 `json:"renewals_per_sec"`
	LeaderCores        float64 `json:"leader_cores"`
	LeaderIdleCores    float64 `json:"leader_idle_cores"`
	LeaderRenewalCores float64 `json:"leader_renewal_cores"`
	FollowerCores      float64 `json:"follower_cores_max"`
	LeaderUsPerCommand float64 `json:"leader_cpu_us_per_command"`
	GossipBytesPerWS   float64 `json:"gossip_bytes_per_worker_per_sec"`
	FairnessErr        float64 `json:"fairness_error"`
	FairnessErrGroup   string  `json:"fairness_error_group"`
	TargetErr          float64 `json:"target_error"`
	SpentPerSec        float64 `json:"spent_permits_per_sec"`

	JoinS      float64 `json:"converge_join_seconds"`
	LeaveS     float64 `json:"converge_leave_seconds"`
	CutS       float64 `json:"converge_cut_seconds"`
	HealS      float64 `json:"converge_heal_seconds"`
	JoinErr    float64 `json:"join_final_error"`
	LeaveErr   float64 `json:"leave_final_error"`
	CutErr     float64 `json:"cut_final_error"`
	HealErr    float64 `json:"heal_final_error"`
	Changed    int     `json:"workers_joined_and_left"`
	CutWorkers int     `json:"workers_cut"`
	// LeaveRejoins is how many times the workers that stayed joined their
	// seed lists again (worker.Stats.GossipRejoins) from the leave until
	// two rejoin periods after every member that stayed saw the leavers
	// gone, the cut and heal included; -1 if they did not all within the
	// phase timeout after the heal.
	LeaveRejoins int64 `json:"leave_rejoins"`

	Error string `json:"error,omitempty"`
}

func printRow(w io.Writer, r result) {
	fmt.Fprintf(w, "   entries/s %.1f  commands/s %.1f  leader %.3f cores (idle %.3f)  %.0f µs/command  gossip %.0f B/worker/s  fairness %.2f %% (target %.2f %%)  join %.1f s  leave %.1f s (%d rejoins)  cut %.1f s  heal %.1f s\n",
		r.EntriesPerSec, r.CommandsPerSec, r.LeaderCores, r.LeaderIdleCores, r.LeaderUsPerCommand, r.GossipBytesPerWS,
		100*r.FairnessErr, 100*r.TargetErr, r.JoinS, r.LeaveS, r.LeaveRejoins, r.CutS, r.HealS)
}

// writeJSON writes the report to path (- for stdout, empty for nowhere).
func writeJSON(path string, rep report) error {
	if path == "" || (path == "-" && rep.Growth == nil) {
		return nil
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	b = append(b, '\n')
	if path == "-" {
		_, err := os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readReports reads results files and merges them: the first file's
// header, every file's results in order, the growth exponents computed
// again over all of them. Files whose fleets ran differently (TTL, rate,
// gossip or register clients) are refused: their curves would not be one.
func readReports(paths []string) (report, error) {
	var out report
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return report{}, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return report{}, fmt.Errorf("%s: %w", p, err)
		}
		if i == 0 {
			out = r
			continue
		}
		if r.fleetSettings() != out.fleetSettings() {
			return report{}, fmt.Errorf("%s: fleet settings %q differ from %s's %q", p, r.fleetSettings(), paths[0], out.fleetSettings())
		}
		out.Results = append(out.Results, r.Results...)
		out.Notes = append(out.Notes, r.Notes...)
	}
	if len(paths) > 1 {
		out.Growth = growth(out.Results)
	}
	return out, nil
}

// fleetSettings names how a report's fleet ran, for comparing reports.
func (r report) fleetSettings() string {
	return fmt.Sprintf("ttl %s, %g permits/s per worker, gossip %s (compressed %t, slowdown %d), via %s, protocol %s, shared clients %d, relays %d",
		r.TTL, r.RatePerWorker, r.Gossip, r.GossipCompressed, r.GossipSlowdown, r.Via, r.Protocol, r.ClientsShared, r.Relays)
}

// chartTitle names the chart's setup: the limit's TTL, the register, and
// how the in-process fleet gossiped when it was not over loopback UDP at
// memberlist's defaults.
func (r report) chartTitle() string {
	t := "permitd leased path: one limit, " + r.TTL + " TTL, 3-node register on loopback"
	if r.Gossip == "mem" {
		t += ", gossip in memory"
	}
	if r.GossipSlowdown > 1 {
		t += fmt.Sprintf(", memberlist's timings %dx slower", r.GossipSlowdown)
	}
	if r.Gossip != "" && !r.GossipCompressed {
		t += ", uncompressed"
	}
	return t
}
