package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/node"
)

// benchoverload.go: permitd bench --mode overload, the overload
// measurement as one command. On one cluster:
//
//  1. a closed-loop warm-up pass, not counted;
//  2. --capacity-passes closed-loop passes of --capacity-duration at
//     --capacity-concurrency: the capacity before;
//  3. an open loop at --overload-factor x the capacity before, for
//     --duration, with --concurrency outstanding;
//  4. the same closed-loop passes again: the capacity after.
//
// The capacity is the median of every pass, before and after. A single
// closed-loop pass is a poor denominator on a shared virtual machine:
// consecutive 5 s passes on one idle cluster moved from 5 500 to 9 000
// decisions/s on the 2-vCPU machine this was built on, with the host's
// CPU steal (1-9 %), which bench therefore reports for every phase.

// OverloadResult is bench --mode overload's report.
type OverloadResult struct {
	Factor float64 `json:"factor"`
	// CapacityBefore and CapacityAfter are the closed-loop passes'
	// goodputs, decisions/s; Capacity is the median of all of them.
	CapacityBefore []float64 `json:"capacity_before_rps"`
	CapacityAfter  []float64 `json:"capacity_after_rps"`
	Capacity       float64   `json:"capacity_rps"`
	// OfferedRPS is the open loop's rate: Factor x the median before.
	OfferedRPS float64 `json:"offered_rps"`
	// Open is the open loop's report; GoodputRatio its goodput over
	// Capacity.
	Open         BenchResult `json:"open"`
	GoodputRatio float64     `json:"goodput_ratio"`
	// StealPct is the host's CPU steal over the passes before, the open
	// loop and the passes after (percent of all CPU time; -1 where
	// /proc/stat cannot be read).
	StealPct [3]float64 `json:"steal_pct"`
	// LeaderHeld is whether the open loop ended with the leader and term
	// it started with.
	LeaderHeld bool `json:"leader_held"`
}

// benchOverload runs the overload measurement described above.
func benchOverload(ctx context.Context, b benchFlags) (OverloadResult, error) {
	res := OverloadResult{Factor: b.overloadFactor}
	closed := b
	closed.mode, closed.concurrency = "closed", b.capacityConcurrency
	closed.duration, closed.maxRequests = b.capacityDuration, 0
	passes := func() ([]float64, error) {
		var out []float64
		for range b.capacityPasses {
			r, err := bench(ctx, closed)
			if err != nil {
				return nil, err
			}
			if r.Errors > r.Requests/100 {
				return nil, fmt.Errorf("closed-loop pass: %d errors in %d requests (first: %s)", r.Errors, r.Requests, r.FirstError)
			}
			out = append(out, r.GoodputRPS)
			closed.create = false
		}
		return out, nil
	}
	// The warm-up pass: a fresh cluster's first seconds (its log file
	// growing, its connections and goroutines starting) are not its
	// capacity.
	if _, err := bench(ctx, closed); err != nil {
		return res, err
	}
	closed.create = false
	s0 := readSteal()
	var err error
	if res.CapacityBefore, err = passes(); err != nil {
		return res, err
	}
	s1 := readSteal()
	res.OfferedRPS = b.overloadFactor * median(res.CapacityBefore)
	if res.OfferedRPS <= 0 {
		return res, errors.New("the closed-loop passes measured no goodput: no capacity to overload")
	}
	open := b
	open.mode, open.openRate, open.create = "open", res.OfferedRPS, false
	if res.Open, err = bench(ctx, open); err != nil {
		return res, err
	}
	s2 := readSteal()
	if res.CapacityAfter, err = passes(); err != nil {
		return res, err
	}
	s3 := readSteal()
	res.Capacity = median(append(slices.Clone(res.CapacityBefore), res.CapacityAfter...))
	res.GoodputRatio = res.Open.GoodputRPS / res.Capacity
	res.StealPct = [3]float64{s0.pctUntil(s1), s1.pctUntil(s2), s2.pctUntil(s3)}
	res.LeaderHeld = res.Open.LeaderBefore != "" && res.Open.LeaderBefore == res.Open.LeaderAfter && res.Open.TermBefore == res.Open.TermAfter
	return res, nil
}

func printOverload(w io.Writer, r OverloadResult) {
	fmt.Fprintf(w, "capacity (closed loop, median of %d passes) %.0f decisions/s; before %s, after %s\n",
		len(r.CapacityBefore)+len(r.CapacityAfter), r.Capacity, rates(r.CapacityBefore), rates(r.CapacityAfter))
	fmt.Fprintf(w, "open loop at %.3g x the capacity before: offered %.0f/s\n", r.Factor, r.OfferedRPS)
	printBench(w, r.Open)
	fmt.Fprintf(w, "goodput %.1f%% of capacity; leader held: %v; host CPU steal before / during / after: %s\n",
		100*r.GoodputRatio, r.LeaderHeld, steals(r.StealPct))
}

func rates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}

func steals(xs [3]float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if x < 0 {
			parts[i] = "unknown"
		} else {
			parts[i] = strconv.FormatFloat(x, 'f', 1, 64) + "%"
		}
	}
	return strings.Join(parts, " / ")
}

// median is the middle of xs (the mean of the two middle ones for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// cpuTicks is the machine's CPU time from /proc/stat's "cpu" line, in
// clock ticks: steal and the total of every field; ok false where it
// cannot be read.
type cpuTicks struct {
	steal, total uint64
	ok           bool
}

func readSteal() cpuTicks {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	return parseCPUTicks(line)
}

// parseCPUTicks reads the aggregate "cpu" line of /proc/stat: user nice
// system idle iowait irq softirq steal [guest guest_nice]. Guest time is
// already counted in user and nice, so only the first eight fields make
// the total.
func parseCPUTicks(line string) cpuTicks {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var t cpuTicks
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		t.total += v
		if i == 7 {
			t.steal = v
		}
	}
	t.ok = true
	return t
}

// pctUntil is the steal between t and later as a percentage of all CPU
// time then, or -1 if either reading failed or no time passed.
func (t cpuTicks) pctUntil(later cpuTicks) float64 {
	if !t.ok || !later.ok || later.total <= t.total || later.steal < t.steal {
		return -1
	}
	return 100 * float64(later.steal-t.steal) / float64(later.total-t.total)
}

// overloadDefaults are the flags of --mode overload that bench's other
// modes ignore.
const (
	defaultOverloadFactor      = 3
	defaultCapacityPasses      = 3
	defaultCapacityDuration    = 5 * time.Second
	defaultCapacityConcurrency = node.DefaultMaxPendingReserves
)
