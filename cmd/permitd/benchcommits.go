package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// benchcommits.go: bench --mode overload reads the nodes' reserve-commit
// counters (GET /v1/status: reserve_batches, batched_reserves,
// reserve_batch_ns) between its phases, and reports for each phase the
// mean reserves an entry carried and the mean time an entry took from
// submission to applied. A run whose goodput reads low is then told
// apart: short batches (the node admitted too few to fill them) or slow
// commits of full ones (its disk and machine).

// commitTotals is the sum over --servers of the nodes' reserve-commit
// counters; ok is false if any server's could not be read (a missing
// node would make the differences meaningless).
type commitTotals struct {
	batches, reserves, nanos uint64
	ok                       bool
}

// statusReadTimeout bounds one reading of every server's status.
const statusReadTimeout = 3 * time.Second

// readCommits reads every server's reserve-commit counters.
func readCommits(ctx context.Context, hc *http.Client, servers []string, b benchFlags) commitTotals {
	ctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	t := commitTotals{ok: len(servers) > 0}
	for _, s := range servers {
		req, err := http.NewRequestWithContext(ctx, "GET", b.scheme()+s+"/v1/status", nil)
		if err != nil {
			return commitTotals{}
		}
		if b.token != "" {
			req.Header.Set("Authorization", "Bearer "+b.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return commitTotals{}
		}
		var st struct {
			Batches  *uint64 `json:"reserve_batches"`
			Reserves *uint64 `json:"batched_reserves"`
			Nanos    *uint64 `json:"reserve_batch_ns"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || st.Batches == nil || st.Reserves == nil || st.Nanos == nil {
			return commitTotals{} // an error, or a node too old to count
		}
		t.batches += *st.Batches
		t.reserves += *st.Reserves
		t.nanos += *st.Nanos
	}
	return t
}

// batchUntil is the mean reserves per entry committed between t and
// later, or -1 if either reading failed or no entry was committed.
func (t commitTotals) batchUntil(later commitTotals) float64 {
	n, ok := t.entriesUntil(later)
	if !ok || later.reserves < t.reserves {
		return -1
	}
	return float64(later.reserves-t.reserves) / float64(n)
}

// commitMillisUntil is the mean time from submission to applied of the
// entries committed between t and later, in milliseconds, or -1 if
// either reading failed or no entry was committed.
func (t commitTotals) commitMillisUntil(later commitTotals) float64 {
	n, ok := t.entriesUntil(later)
	if !ok || later.nanos < t.nanos {
		return -1
	}
	return float64(later.nanos-t.nanos) / float64(n) / 1e6
}

// entriesUntil is the entries committed between t and later; ok is false
// if either reading failed, the counters went back (a node restarted)
// or none was committed.
func (t commitTotals) entriesUntil(later commitTotals) (uint64, bool) {
	if !t.ok || !later.ok || later.batches <= t.batches {
		return 0, false
	}
	return later.batches - t.batches, true
}
