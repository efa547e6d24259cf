package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/wire"
)

// Bounds of the permitd side's setup steps.
const (
	buildTimeout        = 5 * time.Minute
	clusterReadyTimeout = 30 * time.Second
	permitdLimit        = "compare-redis"
	clusterSize         = 3
	// permitdExpiry is the strict limit's expiry: how long after its time
	// a granted permit stays usable. The default, half an interval, is
	// half a nanosecond at 1e9/s, so every grant would expire before its
	// answer left the leader (answered as a refusal). The permits of a
	// benchmark are never used: the expiry only has to outlast the
	// answer's way back, including a reserve's max_wait.
	permitdExpiry = time.Minute
)

// permitdModule is permitd's module. This module requires it with a
// replace directive to the checkout it lives in (go.mod), so that
// checkout is where the binary is built from.
const permitdModule = "github.com/permitd/permitd"

// buildPermitd builds cmd/permitd of the checkout the working directory's
// module resolves permitdModule to (this module's replace directive, or
// permitd's own module) into dir and returns the binary's path. It builds
// in that module, whose go.sum covers the agent's dependencies; flags go
// to go build (the tests' -race).
func buildPermitd(ctx context.Context, dir string, progress io.Writer, flags ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", permitdModule).Output()
	root := strings.TrimSpace(string(out))
	if err != nil || root == "" {
		return "", fmt.Errorf("compare-redis: cannot find the permitd checkout (go list -m %s: %v): run from it (go run -C cmd/compare-redis .), or pass --permitd-bin", permitdModule, err)
	}
	bin := filepath.Join(dir, "permitd")
	args := append(append([]string{"build"}, flags...), "-o", bin, "./cmd/permitd")
	fmt.Fprintln(progress, "building permitd: go -C", root, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout = progress
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("compare-redis: go build ./cmd/permitd in %s: %w", root, err)
	}
	return bin, nil
}

// permitdCluster is a running 3-node permitd cluster.
type permitdCluster struct {
	agents    []*child
	httpAddrs []string // of every node, in ID order
	leader    string   // HTTP address of the leader when the cluster became ready
}

// nodeStatus is the part of GET /v1/status the comparison reads.
type nodeStatus struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	LeaderID string `json:"leader_id"`
	Ready    bool   `json:"ready"`
}

// startCluster starts clusterSize agents on loopback with data directories
// under dir and waits until there is a ready leader and every node is ready.
func startCluster(ctx context.Context, sup *supervisor, bin, dir string) (*permitdCluster, error) {
	ports, err := freeLoopbackPorts(2 * clusterSize)
	if err != nil {
		return nil, err
	}
	ids := make([]string, clusterSize)
	raftAddrs := make([]string, clusterSize)
	pc := &permitdCluster{httpAddrs: make([]string, clusterSize)}
	var initial []string
	for i := range clusterSize {
		ids[i] = "a" + strconv.Itoa(i+1)
		raftAddrs[i] = "127.0.0.1:" + strconv.Itoa(ports[2*i])
		pc.httpAddrs[i] = "127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		initial = append(initial, ids[i]+"="+raftAddrs[i])
	}
	for i := range clusterSize {
		dataDir := filepath.Join(dir, ids[i])
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("compare-redis: %w", err)
		}
		c, err := sup.start("permitd "+ids[i], filepath.Join(dir, ids[i]+".log"), bin, "agent",
			"--id", ids[i], "--data-dir", dataDir,
			"--raft-addr", raftAddrs[i], "--http-addr", pc.httpAddrs[i],
			"--initial-cluster", strings.Join(initial, ","))
		if err != nil {
			return nil, err
		}
		pc.agents = append(pc.agents, c)
	}
	if err := pc.waitReady(ctx); err != nil {
		return nil, err
	}
	return pc, nil
}

// waitReady polls every node's status until a leader reports ready and so
// do all the others, for at most clusterReadyTimeout.
func (pc *permitdCluster) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(clusterReadyTimeout)
	var last string
	for {
		for _, a := range pc.agents {
			if !a.running() {
				return fmt.Errorf("compare-redis: %s exited at start: %v\n%s", a.name, a.waitErr, a.logTail(2000))
			}
		}
		leader, ready := "", 0
		var states []string
		for _, addr := range pc.httpAddrs {
			st, err := getStatus(ctx, hc, addr)
			if err != nil {
				states = append(states, addr+": "+err.Error())
				continue
			}
			states = append(states, fmt.Sprintf("%s: %s ready=%v", st.ID, st.State, st.Ready))
			if st.Ready {
				ready++
				if st.State == "leader" {
					leader = addr
				}
			}
		}
		if leader != "" && ready == len(pc.httpAddrs) {
			pc.leader = leader
			return nil
		}
		last = strings.Join(states, "; ")
		if time.Now().After(deadline) {
			return fmt.Errorf("compare-redis: no ready leader with every node ready after %v (%s)", clusterReadyTimeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func getStatus(ctx context.Context, hc *http.Client, addr string) (nodeStatus, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/status", nil)
	if err != nil {
		return nodeStatus{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nodeStatus{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != 200 {
		return nodeStatus{}, fmt.Errorf("HTTP %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var st nodeStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nodeStatus{}, fmt.Errorf("status: %w", err)
	}
	return st, nil
}

// createLimit creates (or replaces) the strict limit the comparison reserves
// from, through the leader, with an expiry of permitdExpiry, then checks
// that every node grants a reserve.
func (pc *permitdCluster) createLimit(ctx context.Context, rate float64, per time.Duration, maxReserved int64) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	body := fmt.Sprintf(`{"algorithm":"strict","rate":%s,"per":%q,"max_reserved":%d,"expiry":%q}`,
		strconv.FormatFloat(rate, 'g', -1, 64), per.String(), maxReserved, permitdExpiry.String())
	req, err := http.NewRequestWithContext(ctx, "PUT", "http://"+pc.leader+"/v1/limits/"+permitdLimit, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("compare-redis: PUT limit: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("compare-redis: PUT limit %s: HTTP %d %s", body, resp.StatusCode, bytes.TrimSpace(msg))
	}
	for _, addr := range pc.httpAddrs {
		granted, err := httpDecider([]string{addr})(ctx, 0, 0)
		if err != nil {
			return fmt.Errorf("compare-redis: first reserve on %s: %w", addr, err)
		}
		if !granted {
			return fmt.Errorf("compare-redis: first reserve on %s was refused; the limit is not high enough", addr)
		}
	}
	return nil
}

// reserveBody is every reserve's body: one permit, and a max_wait long
// enough that a queued grant is never turned into a refusal.
var reserveBody = []byte(`{"permits":1,"max_wait":"1s"}`)

// httpDecider returns a decideFunc that sends one reserve per HTTP request to
// targets, worker w's seq-th request going to targets[(w+seq) % len]:
// 200 is a grant, 429 a refusal, anything else an error. Each worker keeps
// one keep-alive connection per target (cmd/internal/httplite, the client
// permitd bench uses), so the load generator costs about what go-redis does.
func httpDecider(targets []string) decideFunc {
	path := "/v1/limits/" + permitdLimit + "/reserve"
	var conns sync.Map // worker*len(targets)+target → *httplite.Conn
	return func(ctx context.Context, w, seq int) (bool, error) {
		t := (w + seq) % len(targets)
		key := w*len(targets) + t
		v, ok := conns.Load(key)
		if !ok {
			v, _ = conns.LoadOrStore(key, httplite.New(targets[t], 10*time.Second))
		}
		c := v.(*httplite.Conn)
		code, body, err := c.Do("POST", path, reserveBody)
		if err != nil {
			return false, err
		}
		switch code {
		case 200:
			return true, nil
		case 429:
			return false, nil
		default:
			return false, fmt.Errorf("HTTP %d from %s: %s", code, targets[t], bytes.TrimSpace(body))
		}
	}
}

// clientDecider returns a decideFunc that reserves one permit through the
// Go client over the binary protocol (client.WithBinaryReserves): every
// worker's request is one decision, sent on the pipelined connection the
// client shares among its callers, with a request ID, as a user's code
// would send it. A grant is true, a refusal false.
func clientDecider(c *client.Client) decideFunc {
	return func(ctx context.Context, w, seq int) (bool, error) {
		g, err := c.Reserve(ctx, permitdLimit, 1, time.Second)
		if err != nil {
			return false, err
		}
		return g.Granted, nil
	}
}

// binaryDecider returns a decideFunc that sends one reserve per frame of
// the binary protocol, worker w's seq-th request to conns[(w+seq) % len]
// (one pipelined connection per target, shared by every worker), with no
// request ID: the same work per decision as the Redis side's EVALSHA.
func binaryDecider(conns []*wire.Conn) decideFunc {
	payload := wire.EncodeReserve(wire.Reserve{Limit: permitdLimit, Permits: 1, MaxWaitNanos: int64(time.Second)})
	return func(ctx context.Context, w, seq int) (bool, error) {
		c := conns[(w+seq)%len(conns)]
		code, resp, err := c.Call(ctx, wire.OpReserve, payload)
		if err != nil {
			return false, err
		}
		if code != wire.CodeOK {
			return false, fmt.Errorf("binary answer code %d: %s", code, resp)
		}
		res, err := wire.DecodeReserveResult(resp)
		if err != nil {
			return false, err
		}
		switch res.Status {
		case wire.Granted:
			return true, nil
		case wire.Refused:
			return false, nil
		}
		return false, fmt.Errorf("reserve status %d: %s", res.Status, res.Detail)
	}
}

// dialBinary opens one binary-protocol connection to each target.
func dialBinary(targets []string) ([]*wire.Conn, error) {
	var out []*wire.Conn
	for _, t := range targets {
		nc, err := net.DialTimeout("tcp", t, 5*time.Second)
		if err == nil {
			_, err = nc.Write([]byte{wire.ClientPreface})
		}
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("compare-redis: binary connection to %s: %w", t, err)
		}
		out = append(out, wire.NewConn(nc))
	}
	return out, nil
}

// protocolDesc describes the permitd client of a run.
func protocolDesc(p string) string {
	switch p {
	case protocolBinary:
		return "the binary protocol (one pipelined connection per node shared by all workers, one decision per frame, no request ID)"
	case protocolClient:
		return "the Go client with WithBinaryReserves(1) (the binary protocol plus a request ID per reserve, for exactly-once retries)"
	}
	return "keep-alive HTTP/1.1 (one connection per worker and node, no request ID)"
}
