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
// (transport/api.ReserveStages, which package bench does not import):
// each counter by its JSON name.
type reserveStages map[string]uint64

// stageKeys are the counters of reserve_stages bench reads, "reserves"
// first.
var stageKeys = []string{"reserves", "batch_wait_ns", "raft_queue_ns", "log_append_ns", "replicate_commit_ns", "apply_ns", "answer_ns"}

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
	sum := reserveStages{}
	for _, s := range servers {
		var st struct {
			Stages reserveStages `json:"reserve_stages"`
		}
		if err := getStatus(ctx, hc, s, b, &st); err != nil {
			return nil, fmt.Errorf("reading the status of %s: %w", s, err)
		}
		for _, k := range stageKeys {
			v, ok := st.Stages[k]
			if !ok {
				return nil, fmt.Errorf("the status of %s has no reserve_stages.%s (a version older than this bench)", s, k)
			}
			sum[k] += v
		}
	}
	return sum, nil
}

// stagesBetween is the mean per reserve of each stage between two
// readings, with clientMean the run's mean latency; false if no reserve
// was committed in between or a counter went back (a node restarted).
func stagesBetween(a, b reserveStages, clientMean time.Duration) (Stages, bool) {
	for _, k := range stageKeys {
		if b[k] < a[k] {
			return Stages{}, false
		}
	}
	if b["reserves"] == a["reserves"] {
		return Stages{}, false
	}
	n := float64(b["reserves"] - a["reserves"])
	ms := func(k string) float64 { return float64(b[k]-a[k]) / n / 1e6 }
	s := Stages{
		Reserves:    b["reserves"] - a["reserves"],
		BatchWaitMs: ms("batch_wait_ns"),
		RaftQueueMs: ms("raft_queue_ns"),
		LogAppendMs: ms("log_append_ns"),
		ReplicateMs: ms("replicate_commit_ns"),
		ApplyMs:     ms("apply_ns"),
		AnswerMs:    ms("answer_ns"),
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
