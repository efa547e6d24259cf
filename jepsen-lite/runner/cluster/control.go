package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/httpjson"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/netns"
	"github.com/permitd/permitd/transport/client"
)

// Control talks to the agents' HTTP API and test hooks directly (one node
// at a time, no failover), with short timeouts: a paused or killed node
// must not stall the runner. In a secure run it speaks HTTPS with the
// admin token.
type Control struct {
	api httpjson.Client
	// Kernel, in the namespace mode, takes partitions and loss out of
	// fault states and into the nodes' packet filters.
	Kernel KernelFaults
}

// KernelFaults puts the partitions and loss of node i's faults into its
// packet filters (package netns's *Env in the namespace mode).
type KernelFaults interface {
	Apply(ctx context.Context, i int, f netns.Faults) error
}

// NewControl returns a Control without kernel faults, for agents secured
// with creds (nil: plain HTTP without a token).
func NewControl(creds *secure.Creds) *Control {
	return &Control{api: creds.HTTP(&http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second})}
}

// AnswerCode returns the HTTP status of err's answer, or 0 when err is not
// an agent's non-2xx answer (no answer at all, for example).
func AnswerCode(err error) int { return httpjson.Code(err) }

// Do sends one request to node and decodes a 2xx answer into out (a
// *[]byte receives it raw). Another status is an error with its code (see
// AnswerCode).
func (ct *Control) Do(ctx context.Context, node *Node, method, path string, in, out any, timeout time.Duration) error {
	return ct.api.Do(ctx, node.ID, node.HTTPAddr, method, path, in, out, timeout)
}

// Status reads node's GET /v1/status.
func (ct *Control) Status(ctx context.Context, node *Node, timeout time.Duration) (client.Status, error) {
	var st client.Status
	err := ct.Do(ctx, node, http.MethodGet, "/v1/status", nil, &st, timeout)
	return st, err
}

// FaultState is the body of POST /v1/debug/faults: what permitd's fault
// layer does to one node's raft and forwarding traffic.
type FaultState struct {
	// Block lists the raft addresses the node exchanges nothing with;
	// BlockDial those it may not dial (they may dial it).
	Block     []string `json:"block"`
	BlockDial []string `json:"block_dial"`
	// Loss is the probability that a write is lost; Delay and Jitter
	// delay every write by Delay + [0, Jitter].
	Loss   float64 `json:"loss"`
	Delay  string  `json:"delay"`
	Jitter string  `json:"jitter"`
}

// Equal reports whether two states are the same (lists are sorted).
func (a FaultState) Equal(b FaultState) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// SetFaults replaces node's fault state. In the namespace mode the
// partitions and loss become packet filters in node's namespace and only
// delay and jitter go to permitd's fault layer.
func (ct *Control) SetFaults(ctx context.Context, node *Node, fs FaultState) error {
	if ct.Kernel != nil {
		if err := ct.Kernel.Apply(ctx, node.Index, netns.Faults{Block: fs.Block, BlockDial: fs.BlockDial, Loss: fs.Loss}); err != nil {
			return fmt.Errorf("cluster: packet filters of %s: %w", node.ID, err)
		}
		fs = FaultState{Block: []string{}, BlockDial: []string{}, Delay: fs.Delay, Jitter: fs.Jitter}
	}
	return ct.Do(ctx, node, http.MethodPost, "/v1/debug/faults", fs, nil, time.Second)
}

// SetClock jumps node's clock by offset and sets its rate.
func (ct *Control) SetClock(ctx context.Context, node *Node, offset time.Duration, rate float64) error {
	body := map[string]any{"offset_delta": offset.String(), "rate": rate}
	return ct.Do(ctx, node, http.MethodPost, "/v1/debug/clock", body, nil, time.Second)
}

// Transfer asks via (any node: it forwards to the leader) to hand the
// leadership to the voter to (POST /v1/cluster/transfer-leadership).
func (ct *Control) Transfer(ctx context.Context, via *Node, to string) error {
	var out struct {
		To          string `json:"to"`
		Transferred bool   `json:"transferred"`
	}
	if err := ct.Do(ctx, via, http.MethodPost, "/v1/cluster/transfer-leadership", map[string]string{"to": to}, &out, 5*time.Second); err != nil {
		return err
	}
	if !out.Transferred || out.To != to {
		return fmt.Errorf("cluster: transfer of the leadership to %s via %s: answered %+v", to, via.ID, out)
	}
	return nil
}

// Snapshot makes node take a raft snapshot now (POST /v1/debug/snapshot)
// and returns the applied index it covers.
func (ct *Control) Snapshot(ctx context.Context, node *Node) (uint64, error) {
	var out struct {
		OK           bool   `json:"ok"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	if err := ct.Do(ctx, node, http.MethodPost, "/v1/debug/snapshot", nil, &out, 10*time.Second); err != nil {
		return 0, err
	}
	if !out.OK {
		return 0, fmt.Errorf("cluster: snapshot on %s: answered ok false", node.ID)
	}
	return out.AppliedIndex, nil
}

// Ready reports whether node answers GET /readyz with 200 (it knows a
// leader and has applied its log).
func (ct *Control) Ready(ctx context.Context, node *Node) error {
	return ct.Do(ctx, node, http.MethodGet, "/readyz", nil, nil, time.Second)
}

// DebugState is GET /v1/debug/state.
type DebugState struct {
	AppliedIndex uint64 `json:"applied_index"`
	StateHash    string `json:"state_hash"`
}

// State reads node's applied index and state hash, and the raw answer.
func (ct *Control) State(ctx context.Context, node *Node) (DebugState, []byte, error) {
	var raw []byte
	if err := ct.Do(ctx, node, http.MethodGet, "/v1/debug/state", nil, &raw, 2*time.Second); err != nil {
		return DebugState{}, nil, err
	}
	var st DebugState
	if err := json.Unmarshal(raw, &st); err != nil {
		return DebugState{}, nil, fmt.Errorf("cluster: /v1/debug/state of %s: %w", node.ID, err)
	}
	return st, raw, nil
}

// Statuses reads the status of every running, unpaused node in parallel.
// Nodes that do not answer are missing from the map.
func (ct *Control) Statuses(ctx context.Context, nodes []*Node, timeout time.Duration) map[string]client.Status {
	var mu sync.Mutex
	out := make(map[string]client.Status, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		if up, paused, _ := n.State(); !up || paused {
			continue
		}
		wg.Go(func() {
			st, err := ct.Status(ctx, n, timeout)
			if err == nil {
				mu.Lock()
				out[n.ID] = st
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// LeaderOf returns the node that claims leadership in the highest term
// among sts and that term, or "" when none does.
func LeaderOf(sts map[string]client.Status) (string, uint64) {
	var id string
	var term uint64
	for nid, st := range sts {
		if st.State == "leader" && (st.Term > term || (st.Term == term && nid < id)) {
			id, term = nid, st.Term
		}
	}
	return id, term
}

// WaitLeader waits until a node leads and is ready, up to timeout.
func (ct *Control) WaitLeader(ctx context.Context, nodes []*Node, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		sts := ct.Statuses(ctx, nodes, 500*time.Millisecond)
		if id, _ := LeaderOf(sts); id != "" && sts[id].Ready {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("cluster: no ready leader after %v (answers: %d of %d nodes)", timeout, len(sts), len(nodes))
		}
		if err := wait.Sleep(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// Settle waits until every node answers GET /v1/debug/state with the same
// applied index twice in a row (the cluster is quiet and caught up), up to
// timeout.
func (ct *Control) Settle(ctx context.Context, nodes []*Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last []uint64
	stable := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var idx []uint64
		for _, n := range nodes {
			st, _, err := ct.State(ctx, n)
			if err != nil {
				idx = nil
				break
			}
			idx = append(idx, st.AppliedIndex)
		}
		same := len(idx) == len(nodes)
		for _, v := range idx {
			same = same && v == idx[0]
		}
		if same && slices.Equal(idx, last) {
			stable++
			if stable >= 2 {
				return nil
			}
		} else {
			stable = 0
		}
		last = idx
		_ = wait.Sleep(ctx, 250*time.Millisecond)
	}
	return fmt.Errorf("cluster: nodes did not settle at one applied index within %v (last: %v)", timeout, last)
}
