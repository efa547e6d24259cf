package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// permitdUnderTest returns the binary the end-to-end tests of the leased
// path run: $PERMITD_BIN if set (to run them against another build, such
// as an older commit's), else this package's race-enabled build.
func permitdUnderTest(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("PERMITD_BIN"); bin != "" {
		return bin
	}
	return buildPermitd(t)
}

// startLeasedRegister starts three agents of bin (with the agent flags
// extra), waits for their leader and makes limit lk a strict limit of
// rate permits/s, leased with a pool of C = burst and O = maxOut permits;
// it returns the agents, an HTTP client and the leader's ID.
func startLeasedRegister(t *testing.T, bin string, rate, burst, maxOut int64, extra ...string) (agents []*testAgent, hc *http.Client, leader string) {
	t.Helper()
	agents, hc, httpAddr, leader := startCluster(t, bin, extra...)
	base := "http://" + httpAddr[leader] + "/v1/limits/lk"
	if code, resp := do(t, hc, "PUT", base, fmt.Sprintf(`{"algorithm":"strict","rate":%d,"per":"1s"}`, rate)); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	if code, resp := do(t, hc, "PUT", base+"/lease-policy", fmt.Sprintf(`{"leased":true,"burst_permits":%d,"max_outstanding_permits":%d}`, burst, maxOut)); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}
	return agents, hc, leader
}

// killLeader sends SIGKILL to the agent leader of the three agents and
// waits for one of the other two to lead; it returns the new leader and,
// on since's clock, when it killed the old one and when the new one led.
func killLeader(t *testing.T, hc *http.Client, agents []*testAgent, leader string, since func() int64) (newLeader string, killAt, readyAt int64) {
	t.Helper()
	var killed *testAgent
	var rest []*testAgent
	for _, a := range agents {
		if a.id == leader {
			killed = a
		} else {
			rest = append(rest, a)
		}
	}
	killAt = since()
	killed.signal(t, syscall.SIGKILL)
	restAddr := map[string]string{rest[0].id: rest[0].httpAddr, rest[1].id: rest[1].httpAddr}
	newLeader = waitLeader(t, hc, restAddr, []string{rest[0].id, rest[1].id})
	return newLeader, killAt, since()
}

// TestBinaryWorkersRideOutLeaderKillWithAGroupCut is the operator-style
// run of issue 13, point 1: three agents and six `permitd worker` sidecars
// in three groups of two, each sidecar driven by two closed-loop callers,
// on a 200/s leased limit with the pool (C = 50, O = 100 permits)
// and the default lease TTL of 2 s (renewals every second, a register call
// given up after TTL - margin = 1.8 s). Group C reaches the register
// through one TCP proxy per agent. After 3 s of load the proxies cut group
// C off (its connections close; new ones open and are never answered);
// once C fails closed the register's leader gets SIGKILL; 2.5 s after a
// new leader is up the proxies heal. Asserted:
//
//   - groups A and B, which a majority of the register can still reach,
//     answer nothing but 200 and 429 before the kill and from 1 s after
//     the new leader on, and none at all through the election when the new
//     leader was up within 1.5 s of the kill (an election the renewals'
//     calls outlast, and far shorter than the workers' --unreachable-after
//     of 3 s); through a longer election they may answer 503 only once a
//     renewal's call has timed out;
//   - group C grants again within 10 s of the heal;
//   - the fleet stays within C + O + floor(W/I) + 1 over every window.
//
// Why: a sidecar answers 503 only once a register call has failed. Until
// this test, a worker gave a renewal's call up after RenewEvery (TTL/2),
// when the grant the renewal reports on is past its usable-until, its
// kept permits included; so an election of more than about a second made
// A and B fail closed (the commit before the in-flight allowance, 7cb4564,
// and the allowance alike: 0-8 503s per group in elections of 1.02-1.45 s
// at the agent's default raft timeouts). The call now waits TTL - margin:
// callers are throttled (429) while the grant is spent or expired, and
// get permits again as soon as the new leader answers. With
// PERMITD_LEADERKILL_RAFT_TIMEOUT=1s (hashicorp/raft's default) elections
// took 1.5-2.7 s, and those longer than the call gave 503s for the
// overshoot; since issue 36 a worker answers 503 only once the register
// has been silent for --unreachable-after (3 s), whatever its calls do
// (transport/worker's TestShortTTLFleetWaitsOutALeaderKill asserts it at
// a 400 ms TTL). PERMITD_BIN runs the test against another build.
func TestBinaryWorkersRideOutLeaderKillWithAGroupCut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		rate          = 200 // permits per second
		burst, maxOut = 50, 100
		intervalNanos = int64(time.Second) / rate
		perGroup      = 2 // sidecars per group
		callers       = 2 // closed-loop callers per sidecar
		maxReserves   = 5000
		workerTTL     = "2s"
		renewTimeout  = 1800 * time.Millisecond // TTL - margin: a worker's register-call timeout
	)
	raftTimeout := "500ms"
	if v := os.Getenv("PERMITD_LEADERKILL_RAFT_TIMEOUT"); v != "" {
		raftTimeout = v
	}
	bin := permitdUnderTest(t)
	agents, hc, leader := startLeasedRegister(t, bin, rate, burst, maxOut, "--heartbeat-timeout", raftTimeout, "--election-timeout", raftTimeout)

	// Group C's --servers are the proxies.
	var proxies []*tcpProxy
	var proxied []string
	for _, a := range agents {
		p := newTCPProxy(t, a.httpAddr)
		proxies = append(proxies, p)
		proxied = append(proxied, p.addr())
	}
	groups := []string{"A", "B", "C"}
	const cut = 2 // group C
	n := len(groups) * perGroup
	ports := freePorts(t, 2*n)
	var sidecars []string
	var groupOf []int
	var workers []*testAgent
	for i := range n {
		g := i % len(groups)
		servers := serversOf(agents...)
		if g == cut {
			servers = strings.Join(proxied, ",")
		}
		name := fmt.Sprintf("w%s%d", groups[g], i/len(groups))
		gossip := fmt.Sprintf("127.0.0.1:%d", ports[i])
		join := fmt.Sprintf("127.0.0.1:%d", ports[(i+1)%n])
		sidecar := fmt.Sprintf("127.0.0.1:%d", ports[n+i])
		w := &testAgent{id: "worker-" + name}
		w.start(t, bin, nil, "worker", "--group", groups[g], "--name", name, "--limit", "lk", "--servers", servers,
			"--gossip-addr", gossip, "--join", join, "--http-addr", sidecar, "--ttl", workerTTL)
		workers = append(workers, w)
		sidecars = append(sidecars, sidecar)
		groupOf = append(groupOf, g)
	}
	superviseSidecars(t, hc, workers, sidecars)

	// The load: closed loops, each bounded in count (and stopped at the end).
	start := time.Now()
	since := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var answers []sidecarAnswer
	var failedIn, grantedIn [3]int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range sidecars {
		g := groupOf[i]
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range maxReserves {
					select {
					case <-stop:
						return
					default:
					}
					code, resp := doQuiet(hc, "POST", "http://"+s+"/v1/limits/lk/reserve",
						fmt.Sprintf(`{"permits":1,"max_wait":"500ms","request_id":"lk-%d-%d-%d"}`, i, c, k))
					mu.Lock()
					answers = append(answers, sidecarAnswer{since(), g, code})
					failed := code != 200 && code != 429
					if failed {
						failedIn[g]++
						if failedIn[g] <= 2 { // the first two per group
							t.Logf("%.3f s: sidecar %s (group %s) answered %d %s", time.Since(start).Seconds(), s, groups[g], code, strings.TrimSpace(string(resp)))
						}
					} else if code == 200 {
						grantedIn[g]++
					}
					mu.Unlock()
					if failed {
						time.Sleep(10 * time.Millisecond) // do not spin on a failing sidecar
					}
				}
			}()
		}
	}
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopLoad()
	counts := func() (failed, granted [3]int) {
		mu.Lock()
		defer mu.Unlock()
		return failedIn, grantedIn
	}

	waitUntil(t, 15*time.Second, "3 s of load", func() bool { return since() >= int64(3*time.Second) })
	cutAt := since()
	for _, p := range proxies {
		p.cutOff()
	}
	waitUntil(t, 10*time.Second, "group C failing closed", func() bool { f, _ := counts(); return f[cut] > 0 })
	closedAt := since()

	newLeader, killAt, readyAt := killLeader(t, hc, agents, leader, since)
	waitUntil(t, 15*time.Second, "2.5 s under the new leader", func() bool { return since() >= readyAt+int64(2500*time.Millisecond) })

	for _, p := range proxies {
		p.heal()
	}
	healAt := since()
	_, grantedAtHeal := counts()
	var healed bool
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, g := counts(); g[cut] > grantedAtHeal[cut] {
			healed = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	recoveredAt := since()
	if healed {
		waitUntil(t, 5*time.Second, "0.5 s after C grants again", func() bool { return since() >= recoveredAt+int64(500*time.Millisecond) })
	}
	stopLoad()
	end := since()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("cut C at %.2f s, C failed closed at %.2f s; killed leader %s at %.2f s, %s led %.2f s later; healed at %.2f s, C granted again %.2f s later (%v)",
		float64(cutAt)/1e9, float64(closedAt)/1e9, leader, float64(killAt)/1e9, newLeader, float64(readyAt-killAt)/1e9,
		float64(healAt)/1e9, float64(recoveredAt-healAt)/1e9, healed)
	// Per group: the answers, and those other than 200/429 before the
	// kill, from the kill until 1 s after the new leader, and after.
	type tally struct{ granted, refused, before, election, after int }
	var per [3]tally
	var first, last [3]int64
	var grants []int64
	electionTo := readyAt + int64(time.Second)
	for _, a := range answers {
		c := &per[a.group]
		switch {
		case a.code == 200:
			c.granted++
			grants = append(grants, a.atNanos)
		case a.code == 429:
			c.refused++
		case a.atNanos < killAt:
			c.before++
		case a.atNanos < electionTo:
			if c.election == 0 {
				first[a.group] = a.atNanos
			}
			c.election++
			last[a.group] = a.atNanos
		default:
			c.after++
		}
	}
	for g, c := range per {
		window := ""
		if c.election > 0 {
			window = fmt.Sprintf(" (%.2f-%.2f s after the kill)", float64(first[g]-killAt)/1e9, float64(last[g]-killAt)/1e9)
		}
		t.Logf("group %s: %d granted, %d refused (429); other answers: %d before the kill, %d from the kill to 1 s after the new leader%s, %d after",
			groups[g], c.granted, c.refused, c.before, c.election, window, c.after)
	}
	// A sidecar of A or B never fails closed when the new leader was up
	// within the register-call timeout (TTL - margin) less 300 ms of the
	// kill: a renewal sent just before the kill is then answered before
	// its call times out. With a longer election it may, once a call has
	// timed out, until 1 s after the new leader.
	for g := range groups {
		c := per[g]
		if g == cut {
			continue
		}
		quick := readyAt-killAt < int64(renewTimeout-300*time.Millisecond)
		switch {
		case c.before+c.after != 0:
			t.Errorf("group %s, not cut off, answered %d times other than 200 and 429 before the kill or later than 1 s after the new leader",
				groups[g], c.before+c.after)
		case c.election != 0 && quick:
			t.Errorf("group %s, not cut off, answered %d times other than 200 and 429 through an election of %.2f s (%.2f-%.2f s after the kill): it failed closed although a majority of the register lived and a renewal's call outlasts such an election (%v)",
				groups[g], c.election, float64(readyAt-killAt)/1e9, float64(first[g]-killAt)/1e9, float64(last[g]-killAt)/1e9, renewTimeout)
		case c.election != 0 && first[g]-killAt < int64(renewTimeout-100*time.Millisecond):
			t.Errorf("group %s, not cut off, answered other than 200 and 429 %.2f s after the kill, before any renewal could have timed out (%v)",
				groups[g], float64(first[g]-killAt)/1e9, renewTimeout)
		case c.election != 0:
			t.Logf("group %s, not cut off, failed closed through an election of %.2f s, longer than a renewal's call (%v)",
				groups[g], float64(readyAt-killAt)/1e9, renewTimeout)
		case !quick:
			t.Logf("the election took %.2f s: the zero-503 claim (elections under %v) was not exercised", float64(readyAt-killAt)/1e9, renewTimeout-300*time.Millisecond)
		}
	}
	if !healed {
		t.Errorf("group C granted nothing within 10 s of the heal")
	}
	for _, w := range []int64{int64(100 * time.Millisecond), int64(time.Second), int64(3 * time.Second), end} {
		worst, j := 0, 0
		for i := range grants {
			for grants[i]-grants[j] > w {
				j++
			}
			worst = max(worst, i-j+1)
		}
		if bound := burst + maxOut + w/intervalNanos + 1; int64(worst) > bound {
			t.Errorf("%d permits granted within %v, above the bound %d", worst, time.Duration(w), bound)
		}
	}
}
