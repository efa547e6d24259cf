package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// relayCounter reads one counter of a relay's /metrics page (-1 if it
// cannot be read).
func relayCounter(hc *http.Client, metricsAddr, name string) float64 {
	resp, err := hc.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// TestBinaryWorkersThroughARelay runs three agents, a `permitd relay` and
// two `permitd worker` sidecars given --relay, on a leased limit, with
// reserves through both sidecars all along: the workers' lease commands
// reach the register through the relay in batches; when the relay is
// killed the workers renew at the register's nodes and every reserve is
// still answered 200 or 429 (never a 503); a relay started again on the
// same port gets the workers back; and the grants stay within the
// over-grant bound C + O + floor(W/I) + 1 over the whole run.
func TestBinaryWorkersThroughARelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildPermitd(t)
	agents, hc, httpAddr, leader := startCluster(t, bin)
	base := "http://" + httpAddr[leader] + "/v1/limits/rl"
	if code, resp := do(t, hc, "PUT", base, `{"algorithm":"strict","rate":200,"per":"1s"}`); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	if code, resp := do(t, hc, "PUT", base+"/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}
	var pool struct {
		IntervalNanos         int64 `json:"interval_ns"`
		BurstPermits          int64 `json:"burst_permits"`
		MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	}
	if code, resp := do(t, hc, "GET", base+"/leases", ""); code != 200 || json.Unmarshal(resp, &pool) != nil || pool.IntervalNanos <= 0 {
		t.Fatalf("get leases: %d %s", code, resp)
	}

	ports := freePorts(t, 6)
	relayAddr, metricsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	var relays []*testAgent
	t.Cleanup(func() {
		for _, p := range relays {
			p.signal(t, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, p := range relays {
				t.Logf("--- %s log:\n%s", p.id, p.log.String())
			}
		}
	})
	startRelay := func(name string) *testAgent {
		p := &testAgent{id: name}
		p.start(t, bin, nil, "relay", "--listen", relayAddr, "--metrics-addr", metricsAddr, "--servers", serversOf(agents...))
		relays = append(relays, p)
		return p
	}
	rl := startRelay("relay")
	waitUntil(t, 10*time.Second, "the relay's metrics", func() bool { return relayCounter(hc, metricsAddr, "permitd_relay_batches_total") >= 0 })
	sidecar := []string{fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[3])}
	gossip := []string{fmt.Sprintf("127.0.0.1:%d", ports[4]), fmt.Sprintf("127.0.0.1:%d", ports[5])}
	workers := make([]*testAgent, 2)
	for i := range workers {
		workers[i] = &testAgent{id: fmt.Sprintf("worker%d", i+1)}
		workers[i].start(t, bin, nil, "worker", "--group", fmt.Sprintf("g%d", i+1), "--name", fmt.Sprintf("w%d", i+1),
			"--limit", "rl", "--servers", serversOf(agents...), "--relay", relayAddr,
			"--gossip-addr", gossip[i], "--join", gossip[1-i], "--http-addr", sidecar[i], "--ttl", "1s")
	}
	superviseSidecars(t, hc, workers, sidecar)

	load := startSidecarLoad(t, hc, sidecar, "rl", "r", 3)

	// The workers renew every 500 ms through the relay.
	waitUntil(t, 15*time.Second, "renewals through the relay", func() bool {
		return relayCounter(hc, metricsAddr, "permitd_relay_batched_commands_total") >= 8 && load.total() > 0
	})
	if f := relayCounter(hc, metricsAddr, "permitd_relay_failed_batches_total"); f != 0 {
		t.Errorf("%v of the relay's batches failed on a healthy register", f)
	}

	// Kill the relay: the workers renew at the register's nodes; 3 s is
	// six renewal periods.
	rl.signal(t, syscall.SIGKILL)
	killedAt, grantedAtKill := time.Now(), load.total()
	waitUntil(t, 10*time.Second, "3 s without the relay", func() bool { return time.Since(killedAt) >= 3*time.Second })
	if load.total() == grantedAtKill {
		t.Errorf("no grant in the 3 s after the relay was killed")
	}
	// Started again, the relay gets the workers back (they try it 5 s
	// after they left it).
	startRelay("relay-again")
	waitUntil(t, 20*time.Second, "renewals through the restarted relay", func() bool {
		return relayCounter(hc, metricsAddr, "permitd_relay_batched_commands_total") >= 4
	})
	load.stop()

	granted, w := load.total(), load.window()
	bound := pool.BurstPermits + pool.MaxOutstandingPermits + int64(w)/pool.IntervalNanos + 1
	t.Logf("granted %d in %v; bound C %d + O %d + floor(W/I) %d + 1 = %d; other answers %d",
		granted, w, pool.BurstPermits, pool.MaxOutstandingPermits, int64(w)/pool.IntervalNanos, bound, load.other.Load())
	if granted > bound {
		t.Errorf("granted %d permits in %v, over the bound %d", granted, w, bound)
	}
	if load.other.Load() != 0 {
		t.Errorf("%d answers other than 200 and 429 with a retry time (the relay's death must not fail the sidecars)", load.other.Load())
	}
}

// TestRelayReloadsTokensOnSIGHUPAndStopsOnSIGTERM walks `permitd relay`'s
// signals as an operator uses them: a worker token opens and renews a
// lease through the relay; a token file rewritten without it and a SIGHUP
// revoke it (401 naming the token on the open connection); SIGTERM stops
// the relay with exit status 0.
func TestRelayReloadsTokensOnSIGHUPAndStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	a, hc := startLeadingLoneAgent(t, bin)
	base := "http://" + a.httpAddr + "/v1/limits/rl"
	if code, resp := do(t, hc, "PUT", base, `{"algorithm":"strict","rate":100,"per":"1s"}`); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	if code, resp := do(t, hc, "PUT", base+"/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}

	secret, line := newToken(t, bin, "--role", "worker", "--name", "w1")
	_, otherLine := newToken(t, bin, "--role", "worker", "--name", "w2")
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(line+"\n"+otherLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	relayAddr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	rl := &testAgent{id: "relay"}
	t.Cleanup(func() {
		rl.signal(t, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("--- relay log:\n%s", rl.log.String())
		}
	})
	rl.start(t, bin, nil, "relay", "--listen", relayAddr, "--servers", a.httpAddr, "--token-file", tokenFile)
	waitUntil(t, 10*time.Second, "the relay to listen", func() bool { return strings.Contains(rl.log.String(), "relaying") })

	cl, err := client.New([]string{relayAddr}, client.WithBinaryLeases(), client.WithToken(secret), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := cl.Lease(ctx, "rl", client.LeaseRequest{Holder: "h1", Group: "g1", DemandMilliPerSec: 10_000, TTL: 2 * time.Second})
	if err != nil || g.Status != client.LeaseGranted {
		t.Fatalf("a lease through the relay with a worker token: %+v, %v", g, err)
	}
	rep := client.LeaseReport{TTL: 2 * time.Second}
	if g, err := cl.Renew(ctx, "rl", g.LeaseID, g.Epoch, rep); err != nil || g.Status != client.LeaseGranted {
		t.Fatalf("a renewal through the relay: %+v, %v", g, err)
	}

	if err := os.WriteFile(tokenFile, []byte(otherLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rl.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the relay's reload", func() bool { return strings.Contains(rl.log.String(), "tokens reloaded") })
	_, err = cl.Renew(ctx, "rl", g.LeaseID, g.Epoch, rep)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.Message, `"w1" was revoked`) {
		t.Errorf("a renewal after the token was removed and the relay got SIGHUP: %v; want 401 naming the token", err)
	}
	if strings.Contains(rl.log.String(), secret) {
		t.Errorf("the relay logged the secret")
	}

	rl.signal(t, syscall.SIGTERM)
	if rl.waitErr != nil {
		t.Errorf("the relay exited with %v after SIGTERM; want status 0", rl.waitErr)
	}
}
