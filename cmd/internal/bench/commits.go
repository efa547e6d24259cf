package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// commits.go: bench --mode overload reads the nodes' reserve-entry
// counters (GET /v1/status: reserve_batches, batched_reserves,
// reserve_batch_ns) between its phases, and reports for each phase the
// mean reserves an entry carried and the mean time an entry took from
// submission to applied. A run whose goodput reads low is then told
// apart: short batches (the node admitted too few to fill them) or slow
// commits of full ones (its disk and machine). Only the nodes of
// --servers are read, so the leader must be among them.

// commitCounters is one node's reserve-entry counters.
type commitCounters struct {
	batches, reserves, nanos uint64
}

// commitReading is the counters of every server of --servers, in order,
// or why they could not all be read (err; a missing node would make the
// differences meaningless).
type commitReading struct {
	nodes []commitCounters
	err   error
}

// errNoCommitCounters is a node's status without the counters (a version
// from before them).
var errNoCommitCounters = errors.New("its /v1/status has no reserve_batches, batched_reserves or reserve_batch_ns (a version older than this bench)")

// statusReadTimeout bounds one reading of every server's status.
const statusReadTimeout = 3 * time.Second

// readCommits reads every server's reserve-entry counters.
func readCommits(ctx context.Context, hc *http.Client, servers []string, b Config) commitReading {
	if len(servers) == 0 {
		return commitReading{err: errors.New("no server to read")}
	}
	ctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	r := commitReading{nodes: make([]commitCounters, len(servers))}
	for i, s := range servers {
		c, err := readNodeCommits(ctx, hc, s, b)
		if err != nil {
			return commitReading{err: fmt.Errorf("reading the status of %s: %w", s, err)}
		}
		r.nodes[i] = c
	}
	return r
}

// readNodeCommits reads one server's counters.
func readNodeCommits(ctx context.Context, hc *http.Client, server string, b Config) (commitCounters, error) {
	var st struct {
		Batches  *uint64 `json:"reserve_batches"`
		Reserves *uint64 `json:"batched_reserves"`
		Nanos    *uint64 `json:"reserve_batch_ns"`
	}
	if err := getStatus(ctx, hc, server, b, &st); err != nil {
		return commitCounters{}, err
	}
	if st.Batches == nil || st.Reserves == nil || st.Nanos == nil {
		return commitCounters{}, errNoCommitCounters
	}
	return commitCounters{*st.Batches, *st.Reserves, *st.Nanos}, nil
}

// phaseCommits is what the entries committed between two readings
// carried: how many, their reserves and their nanoseconds, summed over
// the nodes; ok is false if either reading failed, a node's counter went
// back (it restarted) or no entry was committed.
func (r commitReading) phaseCommits(later commitReading) (d commitCounters, ok bool) {
	if r.err != nil || later.err != nil || len(r.nodes) != len(later.nodes) {
		return commitCounters{}, false
	}
	for i, c := range r.nodes {
		l := later.nodes[i]
		if l.batches < c.batches || l.reserves < c.reserves || l.nanos < c.nanos {
			return commitCounters{}, false
		}
		d.batches += l.batches - c.batches
		d.reserves += l.reserves - c.reserves
		d.nanos += l.nanos - c.nanos
	}
	return d, d.batches > 0
}

// batchUntil is the mean reserves per entry committed between r and
// later, or -1 if unknown (phaseCommits).
func (r commitReading) batchUntil(later commitReading) float64 {
	d, ok := r.phaseCommits(later)
	if !ok {
		return -1
	}
	return float64(d.reserves) / float64(d.batches)
}

// commitMillisUntil is the mean time from submission to applied of the
// entries committed between r and later, in milliseconds, or -1 if
// unknown (phaseCommits).
func (r commitReading) commitMillisUntil(later commitReading) float64 {
	d, ok := r.phaseCommits(later)
	if !ok {
		return -1
	}
	return float64(d.nanos) / float64(d.batches) / 1e6
}

// firstCommitError is the first reading's error among rs, "" if none.
func firstCommitError(rs ...commitReading) string {
	for _, r := range rs {
		if r.err != nil {
			return r.err.Error()
		}
	}
	return ""
}
