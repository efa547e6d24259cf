package checker

import (
	"fmt"
	"sort"
)

// WorkerCounters are a lease worker's cumulative counters, as its sidecar's
// GET /v1/status reports them (transport/worker.Stats). Every permit that came
// to the worker (Leased from the register, StolenIn from peers) is spent,
// given away (StolenOut), credited back to the register, expired unused,
// or still outstanding.
type WorkerCounters struct {
	Leased        int64 `json:"leased"`
	Spent         int64 `json:"spent"`
	StolenIn      int64 `json:"stolen_in"`
	StolenOut     int64 `json:"stolen_out"`
	Credited      int64 `json:"credited"`
	ExpiredUnused int64 `json:"expired_unused"`
	Outstanding   int64 `json:"outstanding"`
}

// Add adds o to c, counter by counter.
func (c *WorkerCounters) Add(o WorkerCounters) {
	c.Leased += o.Leased
	c.Spent += o.Spent
	c.StolenIn += o.StolenIn
	c.StolenOut += o.StolenOut
	c.Credited += o.Credited
	c.ExpiredUnused += o.ExpiredUnused
	c.Outstanding += o.Outstanding
}

// WorkerSnapshot is one status read of a worker.
type WorkerSnapshot struct {
	// SentNanos is when the status request was sent, in the history's
	// time base: every grant whose answer had arrived by then was already
	// counted in Spent.
	SentNanos int64 `json:"sent_ns"`
	WorkerCounters
}

// WorkerIncarnation is one process of a worker, from its start until it
// was killed or stopped (counters start at 0 in every process).
type WorkerIncarnation struct {
	// Worker names the worker, Generation the process (1, 2, ...).
	Worker     string `json:"worker"`
	Generation int    `json:"generation"`
	// Snapshots are its status reads in the order they were sent. The
	// last ones should be read after the load stopped (and, for a killed
	// process, right before the kill).
	Snapshots []WorkerSnapshot `json:"snapshots"`
	// GrantNanos are the times (history time base) at which answers
	// granting one permit each came back from this process.
	GrantNanos []int64 `json:"grant_ns"`
}

// LeasedInput is what LeasedConservation judges.
type LeasedInput struct {
	Incarnations []WorkerIncarnation
}

// LeasedConservation checks, from the workers' own counters, that leased
// permits are conserved across leases and steals:
//
//   - every counter of a process only grows;
//   - no process creates permits: at every read,
//     spent <= leased + stolen_in - stolen_out;
//   - no process grants more than it counted: the grants whose answers
//     arrived before a read was sent number at most that read's spent;
//   - steals lose permits, never create them: over the fleet,
//     Σ stolen_in (each process's next-to-last read) <= Σ stolen_out (its
//     last read). A donor debits itself before it sends, so any permit a
//     taker had received by its earlier read was already counted by its
//     donor at the later one.
//
// It cannot see which grant a worker spent from, nor lease-by-lease
// traffic with the register (the window bound at the fake API judges
// that). Details: fleet totals, per-worker totals, reads, processes.
func LeasedConservation(in LeasedInput) (Result, error) {
	r := newResult("lease-conservation")
	var fleet WorkerCounters
	var fleetIn, fleetOut int64
	reads, noReads := 0, 0
	perWorker := map[string]WorkerCounters{}
	for _, inc := range in.Incarnations {
		if inc.Worker == "" {
			return Result{}, fmt.Errorf("%w: a worker incarnation without a name", ErrInvalid)
		}
		grants := append([]int64(nil), inc.GrantNanos...)
		sort.Slice(grants, func(i, j int) bool { return grants[i] < grants[j] })
		name := fmt.Sprintf("%s#%d", inc.Worker, inc.Generation)
		var prev *WorkerSnapshot
		for k := range inc.Snapshots {
			s := &inc.Snapshots[k]
			reads++
			c := s.WorkerCounters
			if c.Leased < 0 || c.Spent < 0 || c.StolenIn < 0 || c.StolenOut < 0 || c.Credited < 0 || c.ExpiredUnused < 0 || c.Outstanding < 0 {
				r.violate("%s read %d: a negative counter %+v", name, k, c)
			}
			if prev != nil {
				p := prev.WorkerCounters
				if c.Leased < p.Leased || c.Spent < p.Spent || c.StolenIn < p.StolenIn || c.StolenOut < p.StolenOut || c.Credited < p.Credited || c.ExpiredUnused < p.ExpiredUnused {
					r.violate("%s read %d: a counter went down: %+v after %+v", name, k, c, p)
				}
			}
			if c.Spent > c.Leased+c.StolenIn-c.StolenOut {
				r.violate("%s read %d at %s: spent %d > leased %d + stolen_in %d - stolen_out %d (permits created by the worker)",
					name, k, dur(s.SentNanos), c.Spent, c.Leased, c.StolenIn, c.StolenOut)
			}
			answered := int64(sort.Search(len(grants), func(i int) bool { return grants[i] >= s.SentNanos }))
			if answered > c.Spent {
				r.violate("%s read %d at %s: %d grants answered before the read, but spent is %d (permits handed out twice)",
					name, k, dur(s.SentNanos), answered, c.Spent)
			}
			prev = s
		}
		n := len(inc.Snapshots)
		if n == 0 {
			noReads++
			continue
		}
		last := inc.Snapshots[n-1].WorkerCounters
		earlier := last
		if n >= 2 {
			earlier = inc.Snapshots[n-2].WorkerCounters
		}
		fleetIn += earlier.StolenIn
		fleetOut += last.StolenOut
		fleet.Add(last)
		w := perWorker[inc.Worker]
		w.Leased += last.Leased
		w.Spent += last.Spent
		w.StolenIn += last.StolenIn
		w.StolenOut += last.StolenOut
		w.Credited += last.Credited
		w.ExpiredUnused += last.ExpiredUnused
		w.Outstanding += last.Outstanding
		perWorker[inc.Worker] = w
	}
	if fleetIn > fleetOut {
		r.violate("fleet: stolen_in %d (earlier reads) > stolen_out %d (later reads): steals created %d permits", fleetIn, fleetOut, fleetIn-fleetOut)
	}
	r.Details["rule"] = "per process and read: spent <= leased + stolen_in - stolen_out, grants answered before the read <= spent, counters only grow; fleet: Σ stolen_in <= Σ stolen_out"
	r.Details["fleet"] = fleet
	r.Details["fleet_stolen_in_checked"] = fleetIn
	r.Details["fleet_stolen_out_checked"] = fleetOut
	r.Details["workers"] = perWorker
	r.Details["processes"] = len(in.Incarnations)
	r.Details["processes_never_read"] = noReads
	r.Details["reads"] = reads
	return r, nil
}
