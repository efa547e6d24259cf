package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// control talks to the agents' HTTP API and test hooks directly (one node
// at a time, no failover), with short timeouts: a paused or killed node
// must not stall the runner.
type control struct {
	hc *http.Client
	// kernel, in the namespace mode, takes partitions and loss out of
	// fault states and into the nodes' packet filters.
	kernel *netnsEnv
}

func newControl() *control {
	return &control{hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}}
}

// statusError is a non-200 answer of an agent.
type statusError struct {
	Code int
	Body string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.Code, e.Body) }

// answerCode returns the HTTP status of err's answer, or 0 when err is
// not an agent's non-200 answer (no answer at all, for example).
func answerCode(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// do sends one request to node and decodes a 200 answer into out. Another
// status is an error wrapping a *statusError (see answerCode).
func (ct *control) do(ctx context.Context, node *agentNode, method, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("runner: encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+node.HTTPAddr+path, body)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ct.hc.Do(req)
	if err != nil {
		return fmt.Errorf("runner: %s %s on %s: %w", method, path, node.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("runner: %s %s on %s: reading: %w", method, path, node.ID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("runner: %s %s on %s: %w", method, path, node.ID, &statusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(b))})
	}
	if out != nil {
		if raw, ok := out.(*[]byte); ok {
			*raw = b
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("runner: %s %s on %s: decoding %q: %w", method, path, node.ID, b, err)
		}
	}
	return nil
}

// status reads node's GET /v1/status.
func (ct *control) status(ctx context.Context, node *agentNode, timeout time.Duration) (client.Status, error) {
	var st client.Status
	err := ct.do(ctx, node, http.MethodGet, "/v1/status", nil, &st, timeout)
	return st, err
}

// faultState is the body of POST /v1/debug/faults.
type faultState struct {
	Block     []string `json:"block"`
	BlockDial []string `json:"block_dial"`
	Loss      float64  `json:"loss"`
	Delay     string   `json:"delay"`
	Jitter    string   `json:"jitter"`
}

// equal reports whether two states are the same (lists are sorted).
func (a faultState) equal(b faultState) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// setFaults replaces node's fault state. In the namespace mode the
// partitions and loss become packet filters in node's namespace and only
// delay and jitter go to permitd's fault layer.
func (ct *control) setFaults(ctx context.Context, node *agentNode, fs faultState) error {
	if ct.kernel != nil {
		var err error
		if fs, err = ct.kernel.applyFaults(ctx, node.Index, fs); err != nil {
			return err
		}
	}
	return ct.do(ctx, node, http.MethodPost, "/v1/debug/faults", fs, nil, time.Second)
}

// setClock jumps node's clock by offset and sets its rate.
func (ct *control) setClock(ctx context.Context, node *agentNode, offset time.Duration, rate float64) error {
	body := map[string]any{"offset_delta": offset.String(), "rate": rate}
	return ct.do(ctx, node, http.MethodPost, "/v1/debug/clock", body, nil, time.Second)
}

// transfer asks via (any node: it forwards to the leader) to hand the
// leadership to the voter to (POST /v1/cluster/transfer-leadership).
func (ct *control) transfer(ctx context.Context, via *agentNode, to string) error {
	var out struct {
		To          string `json:"to"`
		Transferred bool   `json:"transferred"`
	}
	if err := ct.do(ctx, via, http.MethodPost, "/v1/cluster/transfer-leadership", map[string]string{"to": to}, &out, 5*time.Second); err != nil {
		return err
	}
	if !out.Transferred || out.To != to {
		return fmt.Errorf("runner: transfer of the leadership to %s via %s: answered %+v", to, via.ID, out)
	}
	return nil
}

// snapshot makes node take a raft snapshot now (POST /v1/debug/snapshot)
// and returns the applied index it covers.
func (ct *control) snapshot(ctx context.Context, node *agentNode) (uint64, error) {
	var out struct {
		OK           bool   `json:"ok"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	if err := ct.do(ctx, node, http.MethodPost, "/v1/debug/snapshot", nil, &out, 10*time.Second); err != nil {
		return 0, err
	}
	if !out.OK {
		return 0, fmt.Errorf("runner: snapshot on %s: answered ok false", node.ID)
	}
	return out.AppliedIndex, nil
}

// ready reports whether node answers GET /readyz with 200 (it knows a
// leader and has applied its log).
func (ct *control) ready(ctx context.Context, node *agentNode) error {
	return ct.do(ctx, node, http.MethodGet, "/readyz", nil, nil, time.Second)
}

// debugState is GET /v1/debug/state.
type debugState struct {
	AppliedIndex uint64 `json:"applied_index"`
	StateHash    string `json:"state_hash"`
}

// state reads node's applied index and state hash.
func (ct *control) state(ctx context.Context, node *agentNode) (debugState, []byte, error) {
	var raw []byte
	if err := ct.do(ctx, node, http.MethodGet, "/v1/debug/state", nil, &raw, 2*time.Second); err != nil {
		return debugState{}, nil, err
	}
	var st debugState
	if err := json.Unmarshal(raw, &st); err != nil {
		return debugState{}, nil, fmt.Errorf("runner: /v1/debug/state of %s: %w", node.ID, err)
	}
	return st, raw, nil
}

// statuses reads the status of every running, unpaused node in parallel.
// Nodes that do not answer are missing from the map.
func (ct *control) statuses(ctx context.Context, nodes []*agentNode, timeout time.Duration) map[string]client.Status {
	var mu sync.Mutex
	out := make(map[string]client.Status, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		if up, paused, _ := n.state(); !up || paused {
			continue
		}
		wg.Go(func() {
			st, err := ct.status(ctx, n, timeout)
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

// leaderOf returns the node that claims leadership in the highest term
// among sts and that term, or "" when none does.
func leaderOf(sts map[string]client.Status) (string, uint64) {
	var id string
	var term uint64
	for nid, st := range sts {
		if st.State == "leader" && (st.Term > term || (st.Term == term && nid < id)) {
			id, term = nid, st.Term
		}
	}
	return id, term
}

// waitLeader waits until a node leads and is ready, up to timeout.
func (ct *control) waitLeader(ctx context.Context, nodes []*agentNode, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		sts := ct.statuses(ctx, nodes, 500*time.Millisecond)
		if id, _ := leaderOf(sts); id != "" && sts[id].Ready {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("runner: no ready leader after %v (answers: %d of %d nodes)", timeout, len(sts), len(nodes))
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
