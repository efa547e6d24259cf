package server

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
)

func TestReserveMetrics(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "a", `{"algorithm":"strict","rate":1,"per":"1s","max_reserved":5}`)
	e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":3}`)                  // granted, wait 0
	e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":2,"max_wait":"10s"}`) // granted, wait 3s
	e.do(t, "POST", "/v1/limits/a/reserve", `{}`)                             // refused
	e.do(t, "POST", "/v1/limits/zz/reserve", `{}`)                            // unknown
	e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":0}`)                  // invalid
	e.do(t, "POST", "/v1/limits/a%20/reserve", `{}`)                          // invalid
	e.store.SetErr(node.ErrNoLeader)
	e.do(t, "POST", "/v1/limits/a/reserve", `{}`) // error

	m := e.metrics
	for o, want := range map[reserveOutcome]float64{outcomeGranted: 2, outcomeRefused: 1, outcomeUnknown: 1, outcomeInvalid: 2, outcomeError: 1} {
		if got := testutil.ToFloat64(m.proto[protoHTTP].reserves[o]); got != want {
			t.Errorf("reserve_requests_total{outcome=%q} = %v, want %v", outcomeLabels[o], got, want)
		}
	}
	if got := testutil.ToFloat64(m.proto[protoHTTP].grantedPermits); got != 5 {
		t.Errorf("granted_permits_total = %v, want 5", got)
	}
	want := `
# HELP permitd_reserve_wait_seconds Wait before a granted permit may be used, as answered to the client by this node, by protocol.
# TYPE permitd_reserve_wait_seconds histogram
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.001"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.005"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.01"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.05"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.1"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="0.5"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="1"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="2"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="5"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="10"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="30"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="60"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="300"} 0
permitd_reserve_wait_seconds_bucket{protocol="binary",le="+Inf"} 0
permitd_reserve_wait_seconds_sum{protocol="binary"} 0
permitd_reserve_wait_seconds_count{protocol="binary"} 0
permitd_reserve_wait_seconds_bucket{protocol="http",le="0"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.001"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.005"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.01"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.05"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.1"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="0.5"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="1"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="2"} 1
permitd_reserve_wait_seconds_bucket{protocol="http",le="5"} 2
permitd_reserve_wait_seconds_bucket{protocol="http",le="10"} 2
permitd_reserve_wait_seconds_bucket{protocol="http",le="30"} 2
permitd_reserve_wait_seconds_bucket{protocol="http",le="60"} 2
permitd_reserve_wait_seconds_bucket{protocol="http",le="300"} 2
permitd_reserve_wait_seconds_bucket{protocol="http",le="+Inf"} 2
permitd_reserve_wait_seconds_sum{protocol="http"} 3
permitd_reserve_wait_seconds_count{protocol="http"} 2
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "permitd_reserve_wait_seconds"); err != nil {
		t.Error(err)
	}
	// HTTP durations are labelled by route pattern and code, never by name.
	n, err := testutil.GatherAndCount(e.reg, "permitd_http_request_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	// PUT 201, reserve 200/429/404/400/503: 6 series.
	if n != 6 {
		t.Errorf("http duration series = %d, want 6", n)
	}
	if got := testutil.CollectAndCount(m.httpDuration); got != 6 {
		t.Errorf("collected %d", got)
	}
}

func TestRaftGaugesAndBatches(t *testing.T) {
	st := api.Status{State: "follower", Term: 4, CommitIndex: 12, AppliedIndex: 11}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, func() api.Status { return st })
	m.ObserveBatch(3, 2*time.Millisecond)
	m.ObserveBatch(100, 10*time.Millisecond)

	want := `
# HELP permitd_is_leader 1 if this node is the raft leader, else 0.
# TYPE permitd_is_leader gauge
permitd_is_leader 0
# HELP permitd_raft_applied_index Raft index applied to the state machine.
# TYPE permitd_raft_applied_index gauge
permitd_raft_applied_index 11
# HELP permitd_raft_commit_index Raft commit index.
# TYPE permitd_raft_commit_index gauge
permitd_raft_commit_index 12
# HELP permitd_raft_state 1 for the node's current raft state, 0 for the others.
# TYPE permitd_raft_state gauge
permitd_raft_state{state="candidate"} 0
permitd_raft_state{state="follower"} 1
permitd_raft_state{state="leader"} 0
permitd_raft_state{state="shutdown"} 0
# HELP permitd_raft_term Current raft term.
# TYPE permitd_raft_term gauge
permitd_raft_term 4
`
	names := []string{"permitd_is_leader", "permitd_raft_applied_index", "permitd_raft_commit_index", "permitd_raft_state", "permitd_raft_term"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Read at scrape time: a change of status shows in the next scrape.
	st = api.Status{State: "leader", Term: 5}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP permitd_is_leader 1 if this node is the raft leader, else 0.
# TYPE permitd_is_leader gauge
permitd_is_leader 1
`), "permitd_is_leader"); err != nil {
		t.Error(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP permitd_batch_size Reserves carried by one raft log entry.
# TYPE permitd_batch_size histogram
permitd_batch_size_bucket{le="1"} 0
permitd_batch_size_bucket{le="2"} 0
permitd_batch_size_bucket{le="4"} 1
permitd_batch_size_bucket{le="8"} 1
permitd_batch_size_bucket{le="16"} 1
permitd_batch_size_bucket{le="32"} 1
permitd_batch_size_bucket{le="64"} 1
permitd_batch_size_bucket{le="128"} 2
permitd_batch_size_bucket{le="256"} 2
permitd_batch_size_bucket{le="512"} 2
permitd_batch_size_bucket{le="1024"} 2
permitd_batch_size_bucket{le="2048"} 2
permitd_batch_size_bucket{le="+Inf"} 2
permitd_batch_size_sum 103
permitd_batch_size_count 2
`), "permitd_batch_size"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.applyLatency); n != 1 {
		t.Errorf("apply latency series %d", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveBatch(1, time.Second)
	m.countReserve(protoBinary, outcomeGranted)
	m.countLease(protoBinary, leaseGranted)
	m.reserveGranted(protoHTTP, 1, 1)
	m.observeHTTP(routeLimits, 200, time.Second)
	if m.httpHandler() != nil {
		t.Error("nil metrics serve a handler")
	}
}

func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.do(t, "GET", "/healthz", "")
	w := e.do(t, "GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	body := w.Body.String()
	for _, s := range []string{
		`permitd_http_request_duration_seconds_count{code="200",route="/healthz"} 1`,
		`permitd_raft_state{state="leader"} 1`,
		`permitd_is_leader 1`,
		`permitd_reserve_requests_total{outcome="granted",protocol="http"} 0`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}

// TestExpiredGrantMetrics: the grants this node answered as refusals
// because they expired while it held them, and the reports of them it
// could not deliver, are exported from its status.
func TestExpiredGrantMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg, func() api.Status { return api.Status{State: "leader", ExpiredGrants: 3, ExpiredGrantsUnreported: 1} })
	want := `
# HELP permitd_reserves_expired_total Reserves the register granted that this node answered as refusals (429, counted in permitd_reserve_requests_total{outcome="refused"} by the node that answered the client) because the permit expired while it held the answer; the limit's counters count them as refusals too (expired_requests).
# TYPE permitd_reserves_expired_total counter
permitd_reserves_expired_total 3
# HELP permitd_reserves_expired_unreported_total Of permitd_reserves_expired_total, fresh grants this node could not report to the register, whose counters therefore still count them as granted.
# TYPE permitd_reserves_expired_unreported_total counter
permitd_reserves_expired_unreported_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "permitd_reserves_expired_total", "permitd_reserves_expired_unreported_total"); err != nil {
		t.Error(err)
	}
}

// TestSnapshotMetrics: the node's last snapshot index and the snapshots
// it failed to take or restore are exported from its status.
func TestSnapshotMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg, func() api.Status {
		return api.Status{State: "follower", LastSnapshotIndex: 8192, SnapshotFailures: 2, RestoreFailures: 1}
	})
	want := `
# HELP permitd_raft_last_snapshot_index The raft index this node's last snapshot covers (its log is compacted up to it).
# TYPE permitd_raft_last_snapshot_index gauge
permitd_raft_last_snapshot_index 8192
# HELP permitd_snapshot_failures_total Raft snapshots this node failed on since it started, by op: take (encoding or writing one: a full or failing disk), restore (one sent by the leader or read at start).
# TYPE permitd_snapshot_failures_total counter
permitd_snapshot_failures_total{op="restore"} 1
permitd_snapshot_failures_total{op="take"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "permitd_raft_last_snapshot_index", "permitd_snapshot_failures_total"); err != nil {
		t.Error(err)
	}
}
