package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// stages.go: where a run's reserves spent their time on the leader. Run
// reads every server's GET /v1/status reserve_stages (reserveStages)
// when the measured window opens and after the run, and reports each
// stage's mean per reserve over the reserves committed in between (only
// the leader's counters move), and what the client measured beyond their
// sum: its own work, the network, the edge, validation and admission
// before the stamp (outside). With --servers a follower, a forwarded
// reserve's hop to the leader and back is outside too.

// reserveStages is a node's reserve_stages as GET /v1/status serves it
// (transport/api.ReserveStages; package bench does not import it).
type reserveStages struct {
	Reserves             uint64 `json:"reserves"`
	Unmeasured           uint64 `json:"unmeasured"`
	BatchWaitNanos       uint64 `json:"batch_wait_ns"`
	RaftQueueNanos       uint64 `json:"raft_queue_ns"`
	LogAppendNanos       uint64 `json:"log_append_ns"`
	ReplicateCommitNanos uint64 `json:"replicate_commit_ns"`
	ApplyNanos           uint64 `json:"apply_ns"`
	AnswerNanos          uint64 `json:"answer_ns"`
}

// Stages is the mean time per reserve of each stage (reserve_stages)
// over a run, in milliseconds.
type Stages struct {
	// Reserves is how many reserves the means cover (committed between
	// the two readings: the measured window's, and a few warm-up ones
	// whose answers came after it opened).
	Reserves        uint64  `json:"reserves"`
	BatchWaitMs     float64 `json:"batch_wait_ms"`
	RaftQueueMs     float64 `json:"raft_queue_ms"`
	LogAppendMs     float64 `json:"log_append_ms"`
	ReplicateMs     float64 `json:"replicate_commit_ms"`
	ApplyMs         float64 `json:"apply_ms"`
	AnswerMs        float64 `json:"answer_ms"`
	LeaderMs        float64 `json:"leader_ms"`
	ClientMeanMs    float64 `json:"client_mean_ms"`
	OutsideLeaderMs float64 `json:"outside_ms"`
}

// readStages sums every server's reserve_stages (followers' are 0).
func readStages(ctx context.Context, hc *http.Client, servers []string, b Config) (reserveStages, error) {
	ctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	var sum reserveStages
	for _, s := range servers {
		var st struct {
			Stages *reserveStages `json:"reserve_stages"`
		}
		if err := getStatus(ctx, hc, s, b, &st); err != nil {
			return reserveStages{}, fmt.Errorf("reading the status of %s: %w", s, err)
		}
		if st.Stages == nil {
			return reserveStages{}, fmt.Errorf("the status of %s has no reserve_stages (a version older than this bench)", s)
		}
		x := st.Stages
		sum.Reserves += x.Reserves
		sum.Unmeasured += x.Unmeasured
		sum.BatchWaitNanos += x.BatchWaitNanos
		sum.RaftQueueNanos += x.RaftQueueNanos
		sum.LogAppendNanos += x.LogAppendNanos
		sum.ReplicateCommitNanos += x.ReplicateCommitNanos
		sum.ApplyNanos += x.ApplyNanos
		sum.AnswerNanos += x.AnswerNanos
	}
	return sum, nil
}

// stagesBetween is the mean per reserve of each stage between two
// readings, with clientMean the run's mean latency; false if no reserve
// was committed in between or a counter went back (a node restarted).
func stagesBetween(a, b reserveStages, clientMean time.Duration) (Stages, bool) {
	if b.Reserves <= a.Reserves || b.BatchWaitNanos < a.BatchWaitNanos || b.RaftQueueNanos < a.RaftQueueNanos ||
		b.LogAppendNanos < a.LogAppendNanos || b.ReplicateCommitNanos < a.ReplicateCommitNanos ||
		b.ApplyNanos < a.ApplyNanos || b.AnswerNanos < a.AnswerNanos {
		return Stages{}, false
	}
	n := float64(b.Reserves - a.Reserves)
	ms := func(x, y uint64) float64 { return float64(y-x) / n / 1e6 }
	s := Stages{
		Reserves:    b.Reserves - a.Reserves,
		BatchWaitMs: ms(a.BatchWaitNanos, b.BatchWaitNanos),
		RaftQueueMs: ms(a.RaftQueueNanos, b.RaftQueueNanos),
		LogAppendMs: ms(a.LogAppendNanos, b.LogAppendNanos),
		ReplicateMs: ms(a.ReplicateCommitNanos, b.ReplicateCommitNanos),
		ApplyMs:     ms(a.ApplyNanos, b.ApplyNanos),
		AnswerMs:    ms(a.AnswerNanos, b.AnswerNanos),
	}
	s.LeaderMs = s.BatchWaitMs + s.RaftQueueMs + s.LogAppendMs + s.ReplicateMs + s.ApplyMs + s.AnswerMs
	s.ClientMeanMs = float64(clientMean) / 1e6
	s.OutsideLeaderMs = s.ClientMeanMs - s.LeaderMs
	return s, true
}

// stagesReader reads the stages when the measured window opens (start)
// and after the run (finish).
type stagesReader struct {
	before chan stagesReading
}

// stagesReading is one reading or why there is none.
type stagesReading struct {
	st  reserveStages
	err error
}

// startStages reads the stages at measureFrom (or when ctx ends, if
// first: the run then has no stages).
func startStages(ctx context.Context, hc *http.Client, b Config, measureFrom time.Time) *stagesReader {
	r := &stagesReader{before: make(chan stagesReading, 1)}
	go func() {
		t := time.NewTimer(time.Until(measureFrom))
		defer t.Stop()
		select {
		case <-t.C:
			st, err := readStages(ctx, hc, b.Servers, b)
			r.before <- stagesReading{st, err}
		case <-ctx.Done():
			r.before <- stagesReading{err: ctx.Err()}
		}
	}()
	return r
}

// finish reads the stages again and returns the means in between, or
// the reason there are none.
func (r *stagesReader) finish(ctx context.Context, hc *http.Client, b Config, clientMean time.Duration) (*Stages, string) {
	before := <-r.before
	if before.err != nil {
		return nil, before.err.Error()
	}
	after, err := readStages(ctx, hc, b.Servers, b)
	if err != nil {
		return nil, err.Error()
	}
	s, ok := stagesBetween(before.st, after, clientMean)
	if !ok {
		return nil, "no reserve entry committed on the servers read during the run (is the leader among --servers?)"
	}
	return &s, ""
}

// printStages prints r's stages, if any, as text.
func printStages(w io.Writer, r Result) {
	if s := r.Stages; s != nil {
		fmt.Fprintf(w, "leader stages, mean per reserve over %d: batch wait %.3fms, raft queue %.3fms, log append %.3fms, replication+commit %.3fms, apply %.3fms, answer %.3fms = %.3fms; client mean %.3fms, outside the leader's stages %.3fms\n",
			s.Reserves, s.BatchWaitMs, s.RaftQueueMs, s.LogAppendMs, s.ReplicateMs, s.ApplyMs, s.AnswerMs, s.LeaderMs, s.ClientMeanMs, s.OutsideLeaderMs)
	} else if r.StagesError != "" {
		fmt.Fprintf(w, "leader stages: unknown: %s\n", r.StagesError)
	}
}
